"""What single instructions mean: config-only ones change the image config, RUN and WORKDIR become
shell commands. Files (COPY/ADD) are in ``copying``; running and caching in ``session``."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import replace

from ares.images.build.dockerfile import DockerfileError, Instruction, expand, key_values, split_words
from ares.images.config import ImageConfig

CONFIG_ONLY = frozenset(
    {
        "ARG", "ENV", "USER", "SHELL", "LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "VOLUME", "STOPSIGNAL",
        "HEALTHCHECK", "MAINTAINER", "ONBUILD",
    }
)  # fmt: skip


def configure(
    config: ImageConfig,
    args: Mapping[str, str],
    ins: Instruction,
    *,
    build_args: Mapping[str, str],
    global_args: Mapping[str, str],
) -> tuple[ImageConfig, dict[str, str], str | None]:
    """The config and ARGs in scope after a config-only instruction, and a note for the log if any."""
    new_args = dict(args)
    variables = {**args, **config.env}
    text = ins.args
    keyword = ins.keyword
    note = None
    if keyword == "ARG":
        for name, default in key_values(text, "ARG", ins.line):
            if name in build_args:
                new_args[name] = build_args[name]
            elif not default and name in global_args:  # `ARG NAME` re-declares a global ARG
                new_args[name] = global_args[name]
            else:
                new_args[name] = expand(default, variables)
    elif keyword == "ENV":
        values = {k: expand(v, {**new_args, **config.env}) for k, v in key_values(text, "ENV", ins.line)}
        config = config.with_env(**values)
    elif keyword in ("LABEL", "MAINTAINER"):
        pairs = key_values(text, "LABEL", ins.line) if keyword == "LABEL" else [("maintainer", text)]
        config = replace(config, labels={**config.labels, **{k: expand(v, variables) for k, v in pairs}})
    elif keyword == "USER":
        config = replace(config, user=expand(text.strip(), variables))
    elif keyword == "SHELL":
        shell = ins.json_args
        if not shell:
            raise DockerfileError(f'line {ins.line}: SHELL needs the JSON form, e.g. ["/bin/bash", "-c"]')
        config = replace(config, shell=tuple(shell))
    elif keyword in ("CMD", "ENTRYPOINT"):
        argv = tuple(ins.json_args or (*config.shell, text))
        config = replace(config, **{keyword.lower(): argv})
    elif keyword == "EXPOSE":
        ports = tuple(expand(w, variables) for w in split_words(text))
        config = replace(config, exposed_ports=tuple(dict.fromkeys((*config.exposed_ports, *ports))))
    elif keyword == "VOLUME":
        config = replace(config, volumes=(*config.volumes, *(ins.json_args or split_words(text))))
    elif keyword == "STOPSIGNAL":
        config = replace(config, stop_signal=text.strip())
    elif keyword == "HEALTHCHECK":
        config = replace(config, healthcheck=text.strip())
    elif keyword == "ONBUILD":
        note = "ONBUILD only affects images built FROM this one; recorded nowhere"
    return config, new_args, note


def run_command(ins: Instruction, config: ImageConfig) -> str:
    """The shell line a RUN instruction runs (exec form, heredoc script, or shell form)."""
    argv = ins.json_args
    if argv is not None:
        return shlex.join(argv)
    if ins.heredocs and ins.args.strip().lstrip("<-").strip("'\"") == ins.heredocs[0].name:
        return shlex.join([*config.shell, ins.heredocs[0].body])  # RUN <<EOF: a script
    script = ins.args + "".join(f"\n{h.body}{h.name}" for h in ins.heredocs)
    return shlex.join([*config.shell, script])


def workdir_path(ins: Instruction, config: ImageConfig, variables: Mapping[str, str]) -> str:
    path = expand(ins.args.strip(), dict(variables))
    if not path:
        raise DockerfileError(f"line {ins.line}: WORKDIR needs a path")
    from pathlib import PurePosixPath

    return str(PurePosixPath(config.workdir or "/") / path)
