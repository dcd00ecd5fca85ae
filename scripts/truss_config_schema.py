"""Writes the schema of truss's TrussConfig as the Rust side reads it.

Run by scripts/truss-config-schema with the pinned truss's interpreter; the
one argument is the output path (src/truss_config/schema.json).
"""

import enum
import json
import sys
import types
import typing

import annotated_types
import pydantic
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

import truss
import truss.base.constants
from truss.base import custom_types, truss_config

models: dict[str, dict] = {}


def constraints(metadata) -> dict:
    out = {}
    for m in metadata:
        if isinstance(m, annotated_types.Ge):
            out["ge"] = m.ge
        elif isinstance(m, annotated_types.Gt):
            out["gt"] = m.gt
        elif isinstance(m, annotated_types.Le):
            out["le"] = m.le
        elif isinstance(m, pydantic.Discriminator):
            # A discriminator computed by a function: the Rust side ports the
            # function by its name, like a validator.
            out["function"] = m.discriminator.__qualname__
        elif isinstance(m, annotated_types.MinLen):
            out["min_length"] = m.min_length
        elif isinstance(m, pydantic.Strict) or getattr(m, "strict", None):
            out["strict"] = True
        elif type(m).__name__ == "StringConstraints":
            if m.min_length is not None:
                out["min_length"] = m.min_length
            if m.pattern is not None:
                out["pattern"] = m.pattern
        elif isinstance(m, FieldInfo):
            out.update(constraints(m.metadata))
            if m.discriminator:
                out["discriminator"] = m.discriminator
    return out


def resolve(tp):
    """Annotations pydantic left unresolved name classes of the module that
    declares them (the TRT-LLM models refer to one another)."""
    if isinstance(tp, typing.ForwardRef):
        scope = {**vars(typing), **vars(truss_config.trt_llm_config), **vars(truss_config)}
        return eval(tp.__forward_arg__, scope)
    return tp


def walk(tp, extra=None) -> dict:
    extra = dict(extra or {})
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return walk(args[0], {**extra, **constraints(args[1:])})
    if isinstance(tp, typing.ForwardRef):
        return walk(resolve(tp), extra)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) < len(args):
            inner = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
            return {"t": "nullable", "of": walk(inner, extra)}
        if "function" in extra:
            variants = {}
            for a in rest:
                inner, tag = typing.get_args(a)[0], typing.get_args(a)[1]
                variants[tag.tag] = model(inner)
            return {"t": "callable", "function": extra["function"], "variants": variants}
        if "discriminator" not in extra:
            # pydantic's smart mode: the first member the value is exactly an
            # instance of, else the first that accepts it.
            return {"t": "union", "of": [walk(a) for a in rest]}
        disc = extra.pop("discriminator")
        variants = {}
        for a in rest:
            name = model(a)
            value = typing.get_args(a.model_fields[disc].annotation)[0]
            variants[value] = name
        return {"t": "tagged", "field": disc, "variants": variants}
    if tp is typing.Any:
        return {"t": "any"}
    if tp is dict:
        return {"t": "any", "accepts": "mapping"}
    if tp is list:
        return {"t": "any", "accepts": "list"}
    if tp in (str, int, float, bool):
        return {"t": tp.__name__, **extra}
    if origin is list:
        return {"t": "list", "of": walk(args[0]), **extra}
    if origin in (dict, typing.Mapping, typing.MutableMapping) or str(origin) in (
        "<class 'collections.abc.Mapping'>",
        "<class 'collections.abc.MutableMapping'>",
    ):
        key = walk(args[0])
        assert key["t"] == "str", tp
        out = {"t": "dict", "of": walk(args[1]), **extra}
        if "pattern" in key:
            out["key_pattern"] = key["pattern"]
        return out
    if origin is typing.Literal:
        if len(args) > 1:
            return {"t": "enum", "values": list(args)}
        return {"t": "literal", "value": args[0]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"t": "enum", "values": [m.value for m in tp]}
    if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
        return {"t": "model", "name": model(tp), **extra}
    raise SystemExit(f"truss-config-schema: no rule for type {tp!r}")


def validator_names(cls) -> list[str]:
    d = cls.__pydantic_decorators__
    names = set()
    for group in (
        d.validators,
        d.field_validators,
        d.root_validators,
        d.field_serializers,
        d.model_serializers,
        d.model_validators,
    ):
        for name, dec in group.items():
            func = getattr(dec.func, "__func__", dec.func)
            names.add(getattr(func, "__qualname__", f"{cls.__name__}.{name}"))
    for name in d.computed_fields:
        names.add(f"{cls.__name__}.{name}")
    # Checks truss runs in an overridden __init__ or in model_post_init are
    # validators too, for the purpose of porting them.
    for hook in ("__init__", "model_post_init"):
        if hook in cls.__dict__:
            names.add(f"{cls.__name__}.{hook}")
    return sorted(names)


def functions(t) -> list[str]:
    """Discriminator functions named anywhere in a field type."""
    if isinstance(t, dict):
        own = [t["function"]] if "function" in t else []
        return own + [f for v in t.values() for f in functions(v)]
    if isinstance(t, list):
        return [f for v in t for f in functions(v)]
    return []


def model(cls) -> str:
    name = cls.__name__
    if name in models:
        return name
    entry: dict = {}
    models[name] = entry
    entry["extra"] = cls.model_config.get("extra") or "ignore"
    entry["forbid_on_push"] = issubclass(cls, custom_types.ConfigModel)
    entry["validators"] = validator_names(cls)
    # pydantic runs an overridden __init__ without the validation context, so
    # the push-time refusal of unknown keys does not reach this model or any
    # model validated inside it.
    entry["custom_init"] = "__init__" in cls.__dict__
    if issubclass(cls, pydantic.RootModel):
        f = cls.model_fields["root"]
        entry["root"] = walk(f.annotation, constraints(f.metadata))
        entry["validators"] = sorted(set(entry["validators"]) | set(functions(entry["root"])))
        return name
    fields = []
    for fname, f in cls.model_fields.items():
        found = constraints(f.metadata)
        if f.discriminator:
            found["discriminator"] = f.discriminator
        ftype = walk(resolve(f.annotation), found)
        item = {"name": fname, "type": ftype}
        if isinstance(f.validation_alias, pydantic.AliasChoices):
            item["aliases"] = list(f.validation_alias.choices)
        elif isinstance(f.validation_alias, str):
            item["aliases"] = [f.validation_alias]
        if f.is_required():
            item["required"] = True
        else:
            value = (
                f.default_factory() if f.default_factory is not None else f.default
            )
            adapter = pydantic.TypeAdapter(resolve(f.annotation))
            item["default"] = adapter.dump_python(value, mode="json")
        fields.append(item)
    entry["fields"] = fields
    entry["computed"] = sorted(cls.model_computed_fields)
    return name


model(truss_config.TrussConfig)
doc = {
    "generated_by": "scripts/truss-config-schema",
    "truss_version": truss.__version__,
    "root": "TrussConfig",
    "constants": {
        "supported_python_versions": [
            "py" + v.replace(".", "") for v in truss.base.constants.SUPPORTED_PYTHON_VERSIONS
        ],
        "default_non_root_user_id": truss.base.constants.DEFAULT_NON_ROOT_USER_ID,
        "registry_build_secret_prefix": truss.base.constants.REGISTRY_BUILD_SECRET_PREFIX,
        "bei_required_max_num_tokens": truss.base.constants.BEI_REQUIRED_MAX_NUM_TOKENS,
        "openai_compatible_tag": truss.base.constants.OPENAI_COMPATIBLE_TAG,
        "openai_non_compatible_tag": truss.base.constants.OPENAI_NON_COMPATIBLE_TAG,
    },
    "models": dict(sorted(models.items())),
}
with open(sys.argv[1], "w") as f:
    json.dump(doc, f, indent=1, sort_keys=False)
    f.write("\n")
