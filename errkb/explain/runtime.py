"""A small runtime for the precompiled explain templates, so a cold ``errkb explain``
does not import Jinja2 (about a third of its start-up).

``scripts/compile_templates.py`` has Jinja compile the explain templates to Python
(``errkb.explain.compiled``); next to each module Jinja writes it keeps a copy whose one
import line takes its names from here instead of ``jinja2.runtime``. This module gives
those names, and an environment and context with exactly the behaviour the compiled
code relies on (Jinja 3.1's ``Environment.getattr``, ``Context.resolve_or_missing``,
``new_context``, ``LoopContext``, the ``format``, ``length`` and ``join`` filters,
``StrictUndefined``). Anything else a future template needs is missing here: the import
of the copy then fails and explain renders through Jinja2 as before
(tests/test_explain_runtime.py renders every case both ways and compares).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable


class TemplateRuntimeError(Exception):
    pass


class TemplateNotFound(TemplateRuntimeError):
    pass


class UndefinedError(TemplateRuntimeError):
    pass


class _Missing:
    def __repr__(self) -> str:
        return "missing"


missing = _Missing()


class Undefined:
    """Jinja's StrictUndefined: any use but passing it along raises."""

    __slots__ = ("_name",)

    def __init__(self, hint=None, obj=missing, name=None, exc=None) -> None:
        self._name = name

    def _fail(self, *args, **kwargs):
        raise UndefinedError(f"{self._name!r} is undefined")

    __str__ = __bool__ = __iter__ = __len__ = __eq__ = __ne__ = __hash__ = __call__ = __getitem__ = _fail
    __add__ = __radd__ = __mod__ = __rmod__ = __lt__ = __le__ = __gt__ = __ge__ = __contains__ = _fail

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        self._fail()


def identity(x):
    return x


internalcode = identity


def str_join(seq: Iterable) -> str:
    return "".join(map(str, seq))


markup_join = str_join  # autoescape is off: Jinja's markup_join only differs for Markup values


class Markup(str):
    pass


def escape(value) -> str:  # only reached with autoescape on, which explain never is
    raise TemplateRuntimeError("escape is not available in errkb's template runtime")


class Namespace:
    def __init__(self, *args, **kwargs) -> None:
        raise TemplateRuntimeError("namespace() is not available in errkb's template runtime")


Macro = TemplateReference = Namespace


class LoopContext:
    """``loop`` in a ``{% for %}``: iterating it gives (item, loop)."""

    def __init__(self, iterable, undefined, recurse=None, depth0=0) -> None:
        self._items = list(iterable)
        self.length = len(self._items)
        self.index0 = -1

    @property
    def index(self) -> int:
        return self.index0 + 1

    @property
    def first(self) -> bool:
        return self.index0 == 0

    @property
    def last(self) -> bool:
        return self.index0 == self.length - 1

    @property
    def revindex(self) -> int:
        return self.length - self.index0

    def __iter__(self):
        for item in self._items:
            self.index0 += 1
            yield item, self


class _EvalContext:
    autoescape = False
    volatile = False

    def __init__(self, environment) -> None:
        self.environment = environment


def _join(eval_ctx, value, d: str = "", attribute=None) -> str:
    if attribute is not None:
        raise TemplateRuntimeError("join(attribute=...) is not available in errkb's template runtime")
    return str(d).join(map(str, value))


def _format(value, *args, **kwargs) -> str:
    if args and kwargs:
        raise TemplateRuntimeError("can't handle positional and keyword arguments at the same time")
    return str(value) % (kwargs or args)


class Context:
    def __init__(self, environment: Environment, parent: dict) -> None:
        self.environment = environment
        self.parent = parent
        self.vars: dict = {}
        self.exported_vars: set = set()
        self.eval_ctx = _EvalContext(environment)

    def resolve_or_missing(self, key: str):
        if key in self.vars:
            return self.vars[key]
        if key in self.parent:
            return self.parent[key]
        return missing

    def get_all(self) -> dict:
        if not self.vars:
            return self.parent
        if not self.parent:
            return self.vars
        return dict(self.parent, **self.vars)

    def call(__self, __obj, *args, **kwargs):  # Jinja's signature
        kwargs.pop("_block_vars", None)
        kwargs.pop("_loop_vars", None)
        return __obj(*args, **kwargs)


class Template:
    """One compiled template bound to one environment."""

    def __init__(self, environment: Environment, module: types.ModuleType) -> None:
        namespace = dict(vars(module))
        namespace["environment"] = environment
        root = module.root
        # The module's functions read `environment` as a global: each environment gets
        # its own copy of the function over its own namespace (no shared module state).
        self.root_render_func = types.FunctionType(root.__code__, namespace, root.__name__, root.__defaults__, root.__closure__)
        self.environment = environment

    def new_context(self, vars: dict | None = None, shared: bool = False, locals: dict | None = None) -> Context:
        vars = vars or {}
        parent = vars if shared else dict(self.environment.globals, **vars)
        if locals:
            if shared:
                parent = dict(parent)
            for key, value in locals.items():
                if value is not missing:
                    parent[key] = value
        return Context(self.environment, parent)

    def render(self, **kwargs) -> str:
        return "".join(self.root_render_func(self.new_context(kwargs)))


class Environment:
    """What the compiled code reads of a Jinja environment (autoescape off)."""

    undefined = Undefined
    concat = "".join

    def __init__(self, modules: dict[str, types.ModuleType], finalize: Callable, filters: dict, globals: dict) -> None:
        self._modules = modules
        self._templates: dict[str, Template] = {}
        self.finalize = finalize
        self.filters = {"format": _format, "length": len, "count": len, "join": _join, **filters}
        self.globals = dict(globals)

    def getattr(self, obj, attribute: str):
        try:
            return getattr(obj, attribute)
        except AttributeError:
            pass
        try:
            return obj[attribute]
        except (TypeError, LookupError, AttributeError):
            return self.undefined(obj=obj, name=attribute)

    def get_template(self, name: str, parent: str | None = None) -> Template:
        template = self._templates.get(name)
        if template is None:
            module = self._modules.get(name)
            if module is None:
                raise TemplateNotFound(name)
            template = self._templates[name] = Template(self, module)
        return template
