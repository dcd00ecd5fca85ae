"""truss-push chain helper: turns a chain source file into one generated truss
per chainlet, without pushing anything, and describes them as JSON.

Embedded in the truss-push binary and run as
    python3 -B chain_codegen.py TRUSS_VERSION SOURCE_FILE [CHAIN_NAME]
where TRUSS_VERSION is the truss version truss-push pins (its one definition
is the repository's `truss-version` file, compiled into the binary). It needs
the `truss` package (with `truss_chains`) at that version and the `ruff`
executable, which truss's code generation shells out to.

Exactly one JSON object is written to stdout: either the manifest
    {"ok": {"truss_version", "chain_name", "chain_root", "chainlets": [...]}}
(entrypoint first, then its dependencies in dependency order; each with
display_name, name, truss_dir, model_name, is_entrypoint) or
    {"error": {"kind", "message", "traceback"}}.
Anything the user's code or truss prints goes to stderr, so stdout stays
parseable.
"""

import json
import os
import pathlib
import shutil
import sys
import traceback

# Lines of a traceback worth showing: the innermost frames and the error.
TRACEBACK_TAIL_LINES = 12


def _emit(out, obj):
    out.write(json.dumps(obj))
    out.write("\n")
    out.flush()


def _fail(out, kind, message, tb=None):
    _emit(out, {"error": {"kind": kind, "message": message, "traceback": tb or []}})
    sys.exit(1)


def _traceback_tail():
    lines = "".join(traceback.format_exc()).rstrip().splitlines()
    return lines[-TRACEBACK_TAIL_LINES:]


def _major_minor(version):
    return tuple(version.split(".")[:2])


def main():
    # Keep the real stdout for the manifest; point fd 1 (and sys.stdout) at
    # stderr so user prints and subprocesses (ruff) cannot corrupt it.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    if len(sys.argv) not in (3, 4):
        _fail(
            out,
            "usage",
            "usage: chain_codegen.py TRUSS_VERSION SOURCE_FILE [CHAIN_NAME]",
        )
    # The truss version whose generated trusses truss-push knows how to push.
    pinned = sys.argv[1]
    source = pathlib.Path(sys.argv[2]).absolute()
    requested_name = sys.argv[3] if len(sys.argv) == 4 and sys.argv[3] else None

    try:
        from importlib import metadata

        version = metadata.version("truss")
    except Exception:  # noqa: BLE001 - any failure here means "no usable truss"
        _fail(
            out,
            "missing_truss",
            f"the Python at {sys.executable} has no `truss` package: "
            f"install it with `pip install truss=={pinned}`",
        )
    if _major_minor(version) != _major_minor(pinned):
        _fail(
            out,
            "truss_version",
            f"truss {version} is installed at {sys.executable}, but truss-push "
            f"generates chains with truss {pinned}: install it with "
            f"`pip install truss=={pinned}`",
        )
    if shutil.which("ruff") is None:
        _fail(
            out,
            "missing_ruff",
            "the `ruff` executable is not on PATH: truss's chain code generation "
            "runs it; install it with `pip install ruff` in the same environment",
        )

    try:
        import yaml
        from truss_chains import framework, private_types
        from truss_chains.deployment import deployment_client
    except Exception:  # noqa: BLE001 - reported as JSON with its traceback
        _fail(
            out,
            "missing_truss",
            f"cannot import truss_chains from truss {version}",
            _traceback_tail(),
        )

    entered = False
    try:
        with framework.ChainletImporter.import_target(source) as entrypoint:
            entered = True
            chain_name = (
                requested_name
                or entrypoint.meta_data.chain_name
                or entrypoint.display_name
            )
            options = private_types.PushOptionsBaseten.create(
                chain_name=chain_name,
                publish=True,
                promote=False,
                only_generate_trusses=True,
                remote="",
                include_git_info=False,
                working_dir=source.parent,
            )
            entry, deps, _engine, _descriptor = (
                deployment_client._generate_chainlet_artifacts(options, entrypoint)
            )
            chain_root = deployment_client._get_chain_root(entrypoint)
            chainlets = []
            for artifact, is_entrypoint in [(entry, True)] + [(d, False) for d in deps]:
                truss_dir = pathlib.Path(artifact.truss_dir)
                config = yaml.safe_load((truss_dir / "config.yaml").read_text())
                chainlets.append(
                    {
                        "display_name": artifact.display_name,
                        "name": artifact.name,
                        "truss_dir": str(truss_dir),
                        "model_name": config["model_name"],
                        "is_entrypoint": is_entrypoint,
                    }
                )
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - user code may raise anything
        kind = "codegen" if entered else "import"
        what = (
            "generating the chainlet trusses failed"
            if entered
            else f"importing {source} failed"
        )
        _fail(out, kind, f"{what}: {type(e).__name__}: {e}", _traceback_tail())

    _emit(
        out,
        {
            "ok": {
                "truss_version": version,
                "chain_name": chain_name,
                "chain_root": str(chain_root),
                "chainlets": chainlets,
            }
        },
    )


if __name__ == "__main__":
    main()
