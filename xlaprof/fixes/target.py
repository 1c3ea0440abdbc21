"""Loading the user's ``TARGET``: ``path/to/module.py:factory`` or ``package.module:factory``.

The factory returns a model, or ``(model, batch)``, or ``(model, batch, loss_fn)``. Without a
batch, one is made for a model whose first layer is an ``nn.Linear`` (8 rows of its input
width). Without a loss function, the mean of the squared output is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xlaprof.errors import TargetError


@dataclass
class Setup:
    model: Any
    batch: Any
    loss_fn: Callable[[Any], Any]


def _default_loss(output: Any) -> Any:
    return output.float().pow(2).mean()


def _import_script(loader: Any, module: Any, path: Path) -> None:
    """Run the script's top level as an import does, with a command line of its own name only:
    the worker's own arguments are not the script's, and a script that parses its command
    line at import (``args = parser.parse_args()`` at the top) would read them and stop with
    its usage error. A script that still exits while imported (a required argument, a
    ``sys.exit`` at the top) is refused in one line that says what to change."""
    saved = sys.argv
    sys.argv = [str(path)]
    try:
        loader.exec_module(module)
    except SystemExit as exiting:
        raise TargetError(
            f"{path.name}: the script exits while it is imported (exit code {exiting.code}): "
            "it runs its command line at the top level. Put that under "
            '`if __name__ == "__main__":`, or write the factory in a file of its own that '
            "imports only the model code"
        ) from None
    finally:
        sys.argv = saved


def load_factory(target: str) -> Callable[[], Any]:
    module_part, sep, name = target.rpartition(":")
    if not sep or not module_part or not name:
        raise TargetError(f"{target}: expected module.py:factory or package.module:factory")
    if module_part.endswith(".py"):
        path = Path(module_part).resolve()
        if not path.is_file():
            raise TargetError(f"{module_part}: no such file")
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise TargetError(f"{module_part}: cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        _import_script(spec.loader, module, path)
    else:
        try:
            module = importlib.import_module(module_part)
        except ImportError as error:
            raise TargetError(f"{module_part}: cannot be imported ({error})") from None
    factory: object = getattr(module, name, None)
    if not callable(factory):
        raise TargetError(f"{target}: {name!r} is not a function in {module_part}")
    return factory


def build(target: str) -> Setup:
    """Call the factory and complete what it did not give."""
    import torch

    made = load_factory(target)()
    parts = made if isinstance(made, tuple) else (made,)
    model = parts[0]
    if not isinstance(model, torch.nn.Module):
        raise TargetError(f"{target}: the factory must return an nn.Module (or a tuple with one)")
    batch = parts[1] if len(parts) > 1 else None
    loss_fn = parts[2] if len(parts) > 2 else _default_loss
    if batch is None:
        first = next((m for m in model.modules() if isinstance(m, torch.nn.Linear)), None)
        if first is None:
            raise TargetError(f"{target}: return (model, example_batch) from the factory")
        batch = torch.randn(8, first.in_features)
    return Setup(model, batch, loss_fn)
