"""The handler API: ``@handler`` on plain async functions, the registry, and module loading.

A handler is ``async def f(ctx: WorkContext, input: M) -> Submission`` where ``M`` is a pydantic
model (validated from the WorkItem's input) or ``dict``. ``@handler("dist.verify",
version="1.0")`` marks it as the implementation of capability ``dist.verify@1.0``; a
:class:`HandlerRegistry` collects marked functions and picks one for a contract's
``required_capabilities`` (same name, same major version, at least the required version).
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field

from ..protocol import Evidence, best_match, satisfies
from ._errors import HandlerLoadError

if TYPE_CHECKING:
    from ._context import WorkContext

_ATTR = "__missionweave_handler__"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class Submission(BaseModel):
    """What a handler returns when the work is done: ``work.submit`` carries it.

    Attributes:
        outputs: small JSON results (no floats: they are part of a signed body).
        evidence: Evidence for every acceptance criterion of the contract (MW-13.2-a).
        artifacts: SHA-256 hex hashes of artifacts already published (content never travels
            here); what ``ctx.publish`` published in this execution is added by the runtime.
    """

    model_config = ConfigDict(extra="forbid")
    outputs: dict[str, Any] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)


HandlerFn = Callable[["WorkContext", Any], Coroutine[Any, Any, Any]]
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def parse_version(version: str) -> Version:
    """A handler's version, e.g. ``"1.2"`` (a :class:`packaging.version.Version`).

    Raises:
        ValueError: not a version ``packaging`` reads.
    """
    try:
        return Version(version)
    except InvalidVersion:
        raise ValueError(f"version {version!r} is not a version") from None


def compatible(provided: str, required: str) -> bool:
    """Whether a handler of version ``provided`` serves a contract asking ``required``: same
    major version and ``provided >= required`` (:func:`missionweave.protocol.satisfies`)."""
    return satisfies(f"x@{provided}", f"x@{required}")


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """One registered handler.

    Attributes:
        name: the capability name (``dist.verify``).
        version: its version (``1.0``).
        fn: the async function.
        input_model: the pydantic model its input is validated into, or ``None`` for a dict.
        estimate_ms: the runtime's estimate of one execution, milliseconds (admission uses it
            for deadlines, MW-10.3-d); ``None`` uses the admission policy's default.
    """

    name: str
    version: str
    fn: HandlerFn
    input_model: type[BaseModel] | None = None
    estimate_ms: int | None = None

    @property
    def capability(self) -> str:
        """``name@version``, as Agent Cards and contracts spell it."""
        return f"{self.name}@{self.version}"

    def validate_input(self, raw: dict[str, Any]) -> Any:
        """The handler's input: ``raw`` validated into :attr:`input_model`, or ``raw`` itself.

        Raises:
            pydantic.ValidationError: ``raw`` does not fit the model.
        """
        if self.input_model is None:
            return dict(raw)
        return self.input_model.model_validate(raw)


def _input_model(fn: Callable[..., Any]) -> type[BaseModel] | None:
    params = list(inspect.signature(fn).parameters.values())
    if len(params) != 2:
        raise HandlerLoadError(f"handler {fn.__qualname__} must take (ctx, input)")
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to the raw annotation
        hints = {}
    ann = hints.get(params[1].name, params[1].annotation)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    return None


def handler(name: str, *, version: str = "1.0", estimate_ms: int | None = None) -> Callable[[F], F]:
    """Mark an async function as the handler of capability ``name@version``.

    The function is returned unchanged (still directly callable in tests); a
    :class:`HandlerRegistry` or :func:`load_handlers` collects it.

    Args:
        name: the capability name, e.g. ``"dist.verify"``.
        version: a version, e.g. ``"1.0"`` (as ``packaging.version`` reads it).
        estimate_ms: expected duration of one execution, milliseconds (for admission).

    Raises:
        HandlerLoadError: the name or version is malformed, the function is not ``async`` or
            does not take ``(ctx, input)``.
    """
    if not _NAME.match(name) or "@" in name:
        raise HandlerLoadError(f"handler name {name!r} is not a capability id")
    try:
        parse_version(version)
    except ValueError as exc:
        raise HandlerLoadError(str(exc)) from None
    if estimate_ms is not None and estimate_ms < 0:
        raise HandlerLoadError("estimate_ms must be >= 0")

    def deco(fn: F) -> F:
        func: Any = fn  # keep ``fn``'s own type: iscoroutinefunction would narrow it
        if not inspect.iscoroutinefunction(func):
            raise HandlerLoadError(f"handler {fn.__qualname__} must be an async function")
        spec = HandlerSpec(name, version, func, _input_model(fn), estimate_ms)
        setattr(fn, _ATTR, spec)
        return fn

    return deco


def spec_of(fn: object) -> HandlerSpec | None:
    """The :class:`HandlerSpec` a ``@handler`` put on ``fn``, or ``None``."""
    spec = getattr(fn, _ATTR, None)
    return spec if isinstance(spec, HandlerSpec) else None


class HandlerRegistry:
    """The handlers an agent runs, by capability.

    Args:
        handlers: ``@handler``-decorated functions or :class:`HandlerSpec` objects.

    Raises:
        HandlerLoadError: a function is not decorated, or two handlers claim the same
            ``name@version``.
    """

    def __init__(self, handlers: Iterable[HandlerSpec | Callable[..., Any]] = ()) -> None:
        self._specs: dict[str, HandlerSpec] = {}
        for h in handlers:
            self.add(h)

    def add(self, h: HandlerSpec | Callable[..., Any]) -> HandlerSpec:
        """Register a decorated function or a spec; returns the spec."""
        spec = h if isinstance(h, HandlerSpec) else spec_of(h)
        if spec is None:
            raise HandlerLoadError(f"{h!r} is not decorated with @handler")
        other = self._specs.get(spec.capability)
        if other is not None and other.fn is not spec.fn:
            raise HandlerLoadError(f"two handlers for {spec.capability}")
        self._specs[spec.capability] = spec
        return spec

    def handler(
        self, name: str, *, version: str = "1.0", estimate_ms: int | None = None
    ) -> Callable[[F], F]:
        """Like :func:`handler`, and register the function here too."""
        mark = handler(name, version=version, estimate_ms=estimate_ms)

        def deco(fn: F) -> F:
            out = mark(fn)
            self.add(out)
            return out

        return deco

    def __iter__(self) -> Iterator[HandlerSpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.capability))

    def __len__(self) -> int:
        return len(self._specs)

    @property
    def capabilities(self) -> list[str]:
        """Every registered ``name@version``, sorted."""
        return sorted(self._specs)

    def find(self, capability: str) -> HandlerSpec | None:
        """The handler serving ``capability`` (``name@version``): same name, compatible
        version (same major, at least the required version; the highest such wins) —
        :func:`missionweave.protocol.best_match`, the rule ranking and admission use too."""
        key = best_match(self._specs, capability)
        return None if key is None else self._specs[key]

    def for_capabilities(self, required: Iterable[str]) -> tuple[HandlerSpec | None, list[str]]:
        """The handler for a contract and the required capabilities nothing here serves.

        Returns:
            ``(spec, missing)``: ``spec`` serves the first required capability that has a
            handler (``None`` when none has); ``missing`` lists every unserved one. The agent
            can honour the contract only when ``missing`` is empty (MW-10.3-d).
        """
        chosen: HandlerSpec | None = None
        missing: list[str] = []
        for cap in required:
            spec = self.find(cap)
            if spec is None:
                missing.append(cap)
            elif chosen is None:
                chosen = spec
        return chosen, missing


def import_hint(name: str, exc: BaseException) -> str:
    """What to try when handler module ``name`` could not be imported (``exc``): ``""`` when
    the module was found and failed inside (its own error says why), else ``"; "`` and a
    hint — a dotted path for a file path (``examples/hello/handlers.py`` →
    ``examples.hello.handlers``), or where a dotted path is looked up."""
    if name.endswith(".py") or "/" in name or "\\" in name:
        dotted = name.removesuffix(".py").replace("\\", "/").removeprefix("./").strip("/")
        return (
            "; a handler module is named by its dotted path, not a file: did you mean "
            f"{dotted.replace('/', '.')!r} (importable from the current directory or "
            "PYTHONPATH)?"
        )
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing is None or not (name == missing or name.startswith(missing + ".")):
        return ""  # found, and failed inside: its own error says why
    return (
        f"; a handler module is named by its dotted path (e.g. mypkg.handlers) and must be "
        f"importable from the current directory or PYTHONPATH ({missing!r} is not)"
    )


def load_handlers(*modules: str, registry: HandlerRegistry | None = None) -> HandlerRegistry:
    """Import each module and collect every ``@handler`` function defined or imported in it.

    Args:
        *modules: dotted module names, e.g. ``"my_package.handlers"``.
        registry: add to this registry instead of a new one.

    Returns:
        The registry.

    Raises:
        HandlerLoadError: a module cannot be imported (with a hint when it was given as a file
            path, or is not found on ``sys.path``), or holds no handler.
    """
    reg = registry if registry is not None else HandlerRegistry()
    for name in modules:
        try:
            module: ModuleType = importlib.import_module(name)
        except Exception as exc:
            raise HandlerLoadError(
                f"cannot import handler module {name!r}: {type(exc).__name__}: {exc}"
                + import_hint(name, exc)
            ) from exc
        found = [spec for v in vars(module).values() if (spec := spec_of(v)) is not None]
        if not found:
            raise HandlerLoadError(f"module {name!r} has no @handler function")
        for spec in found:
            reg.add(spec)
    return reg


__all__ = [
    "HandlerRegistry",
    "HandlerSpec",
    "Submission",
    "compatible",
    "handler",
    "load_handlers",
    "parse_version",
    "spec_of",
]
