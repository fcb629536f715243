"""Command-line apps: ``hetsched-evaluate``, ``hetsched-train``, ``hetsched-benchmark``.

Each app is a Hydra app whose presets are the packaged ``hetsched/conf`` (so it runs from any
directory, from a checkout or a wheel). :func:`run_app` wraps them all: the project's own errors
(bad trace, cluster, setting, checkpoint, override) print one line on stderr naming what is wrong
and exit with code 2; ``HYDRA_FULL_ERROR=1`` shows the full traceback instead. Any other
exception is a bug and keeps its traceback.

``python -m hetsched evaluate|train|benchmark ...`` runs the same apps.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from hetsched.sim.errors import ConfigError, HetschedError

#: Exit code of a run stopped by bad input (argparse's convention for usage errors).
EXIT_BAD_INPUT = 2
#: Hydra's switch for full tracebacks; when the user sets it, errors are not shortened.
FULL_ERROR_ENV = "HYDRA_FULL_ERROR"


def _one_line(text: str) -> str:
    """``text`` with its whitespace (newlines included) collapsed to single spaces."""
    return " ".join(str(text).split())


def _chain(err: BaseException) -> list[BaseException]:
    """``err`` and its causes / contexts, outermost first (each once)."""
    out: list[BaseException] = []
    cur: BaseException | None = err
    while cur is not None and cur not in out:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def user_error(err: BaseException) -> str | None:
    """The one-line message for an error caused by bad input, or None for anything else.

    Bad input is a :class:`~hetsched.sim.errors.HetschedError` anywhere in the exception chain
    (trace, cluster, config, checkpoint and failure-spec errors all derive from it), a path that
    cannot be used (an :class:`OSError` naming a file), a Hydra composition error (unknown
    preset, bad override) or a missing mandatory value (``???``).

    Args:
        err: The exception that stopped the app.
    """
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    chain = _chain(err)
    for e in chain:
        if isinstance(e, HetschedError):
            return _one_line(str(e))
    for e in chain:
        if isinstance(e, OSError) and e.filename:  # a path on the command line that cannot work
            return _one_line(
                f"cannot use the path {e.filename}: {e.strerror}; check the paths on the command "
                "line (hydra.run.dir, output.dir, workload.path, checkpoints)"
            )
        if isinstance(e, FileNotFoundError):  # ours name the file and how to fix it
            return _one_line(str(e))
    for e in chain:
        if isinstance(e, MissingMandatoryValue):
            key = getattr(e, "full_key", None) or "a setting"
            return (
                f"{key} has no value ('???' in its preset); give it on the command line, "
                f"e.g. {key}=..."
            )
    from hydra.errors import InstantiationException

    for e in chain:
        if isinstance(e, InstantiationException) and isinstance(e.__cause__, TypeError):
            cause = str(e.__cause__)
            if "unexpected keyword argument" in cause:  # an unknown field in a preset or override
                key = getattr(e, "full_key", None) or "a preset"
                return _one_line(
                    f"{key}: {cause}; remove the field or check its spelling "
                    "(`--cfg job` shows the composed config)"
                )
    if isinstance(err, ConfigCompositionException):
        head = str(err).splitlines()[0] if str(err) else "cannot compose the config"
        causes = [c for c in chain[1:] if isinstance(c, OmegaConfBaseException) or str(c)]
        detail = ""
        if causes:
            first = str(causes[0]).strip().splitlines()
            detail = f": {first[0]}" if first else ""
        return _one_line(
            f"bad config: {head}{detail} (check the override's key and value; "
            "`--cfg job` shows the composed config, `--help` lists the presets)"
        )
    return None


_F = TypeVar("_F", bound=Callable[..., Any])


class BadInputExit(SystemExit):
    """Raised by :func:`short_errors` once the one-line message is printed (exit code 2).

    A :class:`SystemExit`, so it passes Hydra's job runner without another report.
    """


def check_complete(cfg: Any) -> None:
    """Raise :class:`ConfigError` naming the first setting still ``???`` in the composed config."""
    from omegaconf import OmegaConf

    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        key = missing[0]
        raise ConfigError(
            f"{key} has no value ('???' in its preset); give it on the command line, e.g. {key}=..."
        )


def short_errors(task: _F) -> _F:
    """Decorate a Hydra task function: a bad-input error prints one line and exits with code 2.

    Raised inside the task, before Hydra's job runner adds its own lines; with
    ``HYDRA_FULL_ERROR=1`` set by the user the error propagates unchanged.
    """

    @functools.wraps(task)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return task(*args, **kwargs)
        except Exception as err:
            msg = None if _USER_FULL_ERROR.get("on", False) else user_error(err)
            if msg is None:
                raise
            print(f"error: {msg}", file=sys.stderr)
            raise BadInputExit(EXIT_BAD_INPUT) from err

    return wrapped  # type: ignore[return-value]


#: Whether the user asked for full tracebacks (set by :func:`run_app` for the running app).
_USER_FULL_ERROR: dict[str, bool] = {}


def run_app(app: Callable[[], Any], argv: Sequence[str] | None = None) -> int:
    """Run a ``@hydra.main`` app, turning bad-input errors into one line and exit code 2.

    Args:
        app: The decorated Hydra main function (reads its overrides from ``sys.argv``).
        argv: Overrides to use instead of ``sys.argv[1:]`` (for calling the app from Python).

    Returns:
        0 on success, :data:`EXIT_BAD_INPUT` when the input was bad.
    """
    full = os.environ.get(FULL_ERROR_ENV) == "1"
    _USER_FULL_ERROR["on"] = full
    saved_argv = sys.argv
    saved_env = os.environ.get(FULL_ERROR_ENV)
    if argv is not None:
        sys.argv = [saved_argv[0] if saved_argv else "hetsched", *argv]
    # Let exceptions reach us instead of Hydra's own multi-line report.
    os.environ[FULL_ERROR_ENV] = "1"
    try:
        app()
    except BadInputExit:
        return EXIT_BAD_INPUT
    except Exception as err:
        msg = None if full else user_error(err)
        if msg is None:
            raise
        print(f"error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        sys.argv = saved_argv
        if saved_env is None:
            os.environ.pop(FULL_ERROR_ENV, None)
        else:
            os.environ[FULL_ERROR_ENV] = saved_env
    return 0
