"""The host base image: the host's system directories as overlay mounts, secrets masked.

The host base exposes only the host's system directories (/usr, /etc, /lib*, /bin, /sbin), each as
its own overlay (a lower layer may not contain other mounts, and "/" does), on top of a generated
skeleton root. /root, /home, /tmp, the project checkout and every other host tree are absent; files
in /etc that are not world-readable (shadow, private keys, ...) are masked by empty files in a
generated layer above /etc. Mount plans themselves are ``ares.images.rootfs`` values.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ares.images.rootfs import OPAQUE_XATTR, OverlayMount, RootfsPlan

SYSTEM_DIRS = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
SKELETON_DIRS = {
    "tmp": 0o1777,
    "root": 0o700,
    "home": 0o755,
    "var": 0o755,
    "var/tmp": 0o1777,
    "var/log": 0o755,
    "var/lib": 0o755,
    "var/cache": 0o755,
    "run": 0o755,
    "opt": 0o755,
    "srv": 0o755,
    "mnt": 0o755,
    "proc": 0o555,
    "dev": 0o755,
    "sys": 0o555,
}
ETC_SECRETS = ("shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "security/opasswd")


def build_host_base(base_dir: Path, host_root: Path = Path("/")) -> RootfsPlan:
    """Create the skeleton and /etc mask layers in ``base_dir`` and return the host base plan."""
    skeleton = base_dir / "skeleton"
    etc_mask = base_dir / "etc-mask"
    skeleton.mkdir(parents=True)
    etc_mask.mkdir()
    for rel, mode in SKELETON_DIRS.items():
        (skeleton / rel).mkdir(parents=True, exist_ok=True)
        os.chmod(skeleton / rel, mode)
    mounts = [OverlayMount("/", (str(skeleton),))]
    for name in SYSTEM_DIRS:
        host_path = host_root / name
        if host_path.is_symlink():
            os.symlink(os.readlink(host_path), skeleton / name)
        elif host_path.is_dir():
            (skeleton / name).mkdir()
            lower = (str(etc_mask), str(host_path)) if name == "etc" else (str(host_path),)
            mounts.append(OverlayMount(f"/{name}", lower))
    _mask_secrets(host_root / "etc", etc_mask)
    return RootfsPlan(tuple(mounts))


def _mask_secrets(etc: Path, mask: Path) -> None:
    """Shadow every /etc entry that is not world-readable (and known secrets) with an empty one."""
    for rel in ETC_SECRETS:
        _mask_file(mask / rel)
    for dirpath, dirnames, filenames in os.walk(etc):
        rel_dir = Path(dirpath).relative_to(etc)
        for name in list(dirnames):
            st = os.lstat(os.path.join(dirpath, name))
            if not st.st_mode & stat.S_IROTH or not st.st_mode & stat.S_IXOTH:
                hidden = mask / rel_dir / name
                hidden.mkdir(parents=True, exist_ok=True)
                os.setxattr(hidden, OPAQUE_XATTR, b"y")
                dirnames.remove(name)
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and not st.st_mode & stat.S_IROTH:
                _mask_file(mask / rel_dir / name)


def _mask_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
