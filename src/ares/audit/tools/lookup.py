"""Look for the answer where a task may have left it, and use what is found.

Run in the sandbox as ``python3 lookup.py SPEC`` (SPEC: JSON with workdir and files, the source files
an exploit targets). Three places are searched, and each finding is applied to the tree:

* git: every commit other than HEAD that refs, reflogs, stashes or unreachable objects still hold;
  the newest one's non-test files are checked out (a later commit, or a stash, holds the fix);
* patch files anywhere on the filesystem (``*.patch``, ``*.diff``, ``solve.sh`` and ``/solution``):
  each that applies to the tree is applied;
* caches: another copy of a targeted file (pip and other caches, site dirs, /tmp, /opt; plain files
  and members of wheels, zips and tarballs), copied over ours when it differs.

Prints what it found and applied. The audit scores the result like any other exploit: a lookup that
recovers the answer is one whose findings earn a reward.
"""

import json
import os
import subprocess
import sys
import tarfile
import time
import zipfile

ROOTS = (
    "/root/.cache",
    "/home",
    "/tmp",
    "/var/cache",
    "/var/tmp",
    "/opt",
    "/usr/local/lib",
    "/usr/lib",
    "/srv",
)
PATCH_ROOTS = ("/",)
#: System trees not searched for patch files (the image's own packages, not a task's leftovers).
SKIP = {"/proc", "/sys", "/dev", "/run", "/usr/lib", "/usr/share", "/usr/include", "/usr/bin", "/usr/sbin"}
SKIP |= {"/lib", "/lib64", "/lib32", "/bin", "/sbin", "/nix", "/snap", "/usr/libexec"}
MAX_BYTES = 2_000_000
ARCHIVES = (".whl", ".zip", ".tar.gz", ".tgz", ".tar")
#: Seconds each filesystem search may take (a big image is not walked whole).
WALK_SECONDS = 8.0


def git(workdir, *args):
    run = subprocess.run(("git", "-C", workdir, *args), capture_output=True, text=True, timeout=60)
    return run.stdout if run.returncode == 0 else ""


def is_test(path):
    name = os.path.basename(path)
    return name.startswith("test_") or name.endswith("_test.py") or "/tests/" in "/" + path


def from_git(workdir):
    if not os.path.isdir(os.path.join(workdir, ".git")):
        return
    head = git(workdir, "rev-parse", "HEAD").strip()
    commits = set(git(workdir, "rev-list", "--all", "--reflog").split())
    commits |= set(
        line.split()[-1]
        for line in git(workdir, "fsck", "--unreachable", "--no-reflogs").splitlines()
        if " commit " in line
    )
    commits.discard(head)
    if not commits:
        print("git: no commit besides HEAD")
        return
    dated = sorted((int(git(workdir, "log", "-1", "--format=%ct", c).strip() or 0), c) for c in commits)
    newest = dated[-1][1]
    changed = [p for p in git(workdir, "diff", "--name-only", head, newest).split() if not is_test(p)]
    print(f"git: {len(commits)} other commits; applying {newest[:12]} ({len(changed)} files)")
    if changed:
        git(workdir, "checkout", newest, "--", *changed)


def walk(roots, accept):
    deadline = time.monotonic() + WALK_SECONDS
    for top in roots:
        for root, dirs, files in os.walk(top):
            if time.monotonic() > deadline:
                print(f"search of {top} cut after {WALK_SECONDS:g}s")
                return
            if root in SKIP or root.startswith(("/proc/", "/sys/", "/dev/")):
                dirs[:] = []
                continue
            for name in files:
                path = os.path.join(root, name)
                try:
                    if (
                        os.path.isfile(path)
                        and not os.path.islink(path)
                        and os.path.getsize(path) <= MAX_BYTES
                        and accept(path)
                    ):
                        yield path
                except OSError:
                    continue


def from_patches(workdir):
    def wanted(path):
        return (
            path.endswith((".patch", ".diff"))
            or os.path.basename(path) == "solve.sh"
            or path.startswith("/solution/")
        )

    for path in walk(PATCH_ROOTS, wanted):
        if path.startswith(workdir + "/"):
            continue
        if path.endswith("solve.sh"):
            run = subprocess.run(("bash", path), cwd=workdir, capture_output=True, timeout=60)
        else:
            run = subprocess.run(("git", "apply", path), cwd=workdir, capture_output=True, timeout=60)
            if run.returncode != 0:
                run = subprocess.run(
                    ("patch", "-p1", "--forward", "-i", path), cwd=workdir, capture_output=True, timeout=60
                )
        print("patch: {} {}".format(path, "applied" if run.returncode == 0 else "did not apply"))


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def members(path, tails):
    """(member, bytes) of an archive whose names end with one of ``tails``."""
    try:
        if path.endswith((".whl", ".zip")):
            with zipfile.ZipFile(path) as archive:
                for name in archive.namelist():
                    if name.endswith(tails):
                        yield path + "!" + name, archive.read(name)
        else:
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.isfile() and member.name.endswith(tails):
                        yield path + "!" + member.name, archive.extractfile(member).read()
    except Exception:
        return


def target_files(workdir, spec):
    """The targeted files: the ones given, else those defining the targeted functions."""
    if spec.get("files"):
        return list(spec["files"])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import locate

    functions = set(spec.get("functions") or ())
    found = [p for p in locate.sources(workdir) if functions and locate.defined(p, functions)]
    return [os.path.relpath(p, workdir) for p in found[: locate.MAX_FILES]]


def from_caches(workdir, files):
    tails = {}
    for rel in files:
        parts = rel.split("/")
        tails["/" + "/".join(parts[-2:])] = rel
    if not tails:
        print("caches: no target file to look for")
        return
    ends = tuple(tails)
    for path in walk(ROOTS, lambda p: p.endswith(ends) or p.endswith(ARCHIVES)):
        if path.startswith(workdir + "/"):
            continue
        found = members(path, ends) if path.endswith(ARCHIVES) else [(path, read(path))]
        for where, data in found:
            rel = next(tails[t] for t in ends if where.endswith(t))
            mine = os.path.join(workdir, rel)
            if os.path.isfile(mine) and read(mine) != data:
                with open(mine, "wb") as handle:
                    handle.write(data)
                print(f"cache: {where} copied over {rel}")


def main():
    spec = json.loads(sys.argv[1])
    workdir = spec["workdir"].rstrip("/") or "/"
    for step in (from_git, from_patches):
        try:
            step(workdir)
        except Exception as exc:
            print(f"{step.__name__} failed: {exc!r}")
    try:
        from_caches(workdir, target_files(workdir, spec))
    except Exception as exc:
        print(f"from_caches failed: {exc!r}")


if __name__ == "__main__":
    main()
