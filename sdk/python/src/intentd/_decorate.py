"""What the once() decorators of Client and AsyncClient share: deriving the
key and the payload of one call of the decorated function."""

from __future__ import annotations

import contextvars
import inspect
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

from .keys import key as make_key
from .types import Grant

KeySpec = Union[str, Callable[..., Any]]

_current_grant: "contextvars.ContextVar[Optional[Grant]]" = contextvars.ContextVar("intentd_grant", default=None)


def current_grant() -> Optional[Grant]:
    """The Grant of the effect running now under do() or a once()-decorated
    function (in this thread or task), or None outside one. A decorated tool
    reads its fencing token or execution token here, and checks
    current_grant().cancelled before it performs the effect."""
    return _current_grant.get()


def set_grant(g: Optional[Grant]) -> "contextvars.Token[Optional[Grant]]":
    return _current_grant.set(g)


def reset_grant(tok: "contextvars.Token[Optional[Grant]]") -> None:
    _current_grant.reset(tok)


class CallSpec:
    """How a decorated function's calls become do() calls."""

    def __init__(self, fn: Callable[..., Any], tool: str, key: Optional[KeySpec], payload: Optional[Callable[..., Any]],
                 exclude: Iterable[str]) -> None:
        if not isinstance(tool, str) or not tool:
            raise TypeError("once(): tool is required")
        if key is None:
            raise TypeError("once(): key is required: a function of the call's arguments (or a str) that names "
                            "the logical effect, the same on every retry of it")
        self.fn = fn
        self.tool = tool
        self.key = key
        self.payload = payload
        self.exclude = set(exclude)
        try:
            self.sig: Optional[inspect.Signature] = inspect.signature(fn)
        except (TypeError, ValueError):
            self.sig = None
        if self.sig is not None:
            params = list(self.sig.parameters.values())
            if params and params[0].name in ("self", "cls"):
                self.exclude.add(params[0].name)

    def derive(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[str, Any]:
        """The key and the payload of one call. The key and payload
        functions get the call's arguments by name (defaults applied, a
        **kwargs parameter's items merged in), so ``key=lambda order_id, **_:
        order_id`` works however the function was called."""
        named: Optional[Dict[str, Any]] = None
        if self.sig is not None:
            bound = self.sig.bind(*args, **kwargs)
            bound.apply_defaults()
            named = {}
            for name, v in bound.arguments.items():
                if self.sig.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                    named.update(v)
                else:
                    named[name] = v

        def call(f: Callable[..., Any]) -> Any:
            return f(**named) if named is not None else f(*args, **kwargs)

        k = call(self.key) if callable(self.key) else self.key
        if isinstance(k, (tuple, list)):
            k = make_key(self.tool, *[p if isinstance(p, (str, bytes)) else str(p) for p in k])
        if self.payload is not None:
            p = call(self.payload)
        elif named is not None:
            p = {name: v for name, v in named.items() if name not in self.exclude}
        else:
            p = {"args": list(args), "kwargs": kwargs}
        return k, p
