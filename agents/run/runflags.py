"""The run options on command lines: the flags `run` and `worker` offer (built from the declarations in
agents/run/runconfig.py, one help panel per section), a chosen policy's own flags, the arguments that pass options
to a worker process, and --search-option pairs."""
from __future__ import annotations

import difflib
import json

import tomllib
import types
import typing
from typing import Annotated, Any, Literal

import msgspec

from autocomp_zmq.agents.engine.policy import DEFAULT_POLICY, UnknownPolicyError, config_class, policy_class
from autocomp_zmq.agents.run.runconfig import (SECTIONS, ConfigError, RunConfig, declared_options, flag_of,
                                               policy_options)

POLICY_PANEL = f"search: {DEFAULT_POLICY}"     # the --help panel of the default policy's own options

# every worker takes the run's heartbeat and when to give up (its liveness comes in the coordinator's welcome);
# model workers also take the model-call options
BUS_WORKER_OPTIONS = ("heartbeat_s", "max_refused", "unreachable_s")
WORKER_OPTIONS = (*BUS_WORKER_OPTIONS, "call_timeout_s", "call_retries", "temperature", "reasoning_effort", "max_tokens",
                  "llm_concurrency", "openai_api", "long_cache", "service_tier", "batch_window_s")


def cli_options(names: tuple[str, ...] | None = None) -> list[tuple[str, Any, dict, Any, str]]:
    """(name, plain type, declaration, default, section) of the options a command offers as flags, in
    declaration order: every section's, then the default policy's own (section "search: beam"). These flags exist
    before --search is read: another policy's options are read from the arguments left over (policy_flags), and
    `launch.py plugins` lists them."""
    specs = [(name, hint, decl, cls, section) for section, cls in SECTIONS.items()
             for name, (hint, decl) in declared_options(cls).items()]
    default = config_class(policy_class(DEFAULT_POLICY))
    specs += [(name, hint, decl, default, POLICY_PANEL) for name, (hint, decl) in policy_options().items()
              if decl.get("help")]
    return [(name, plain_type(hint), decl, _default(cls, name), section)
            for name, hint, decl, cls, section in specs if names is None or name in names]


def help_panels() -> list[str]:
    """The sections in the order --help shows them: a policy's own options right after the search section."""
    return [name for section in SECTIONS for name in (section, POLICY_PANEL if section == "search" else None)
            if name]


def plain_type(hint: Any) -> Any:
    """The type a command-line parser reads: bounds, None and Literal choices taken off (int | None -> int)."""
    while typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = plain_type(next(a for a in typing.get_args(hint) if a is not type(None)))
    if typing.get_origin(hint) is Literal:
        return type(typing.get_args(hint)[0])
    return hint


def _default(cls: type, name: str) -> Any:
    field = next(f for f in msgspec.structs.fields(cls) if f.name == name)
    return field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default


def shown_default(decl: dict, value: Any) -> str:
    """How --help shows a default: none, on/off, or the value."""
    if decl.get("shown"):
        return decl["shown"]
    if isinstance(value, list):
        return ", ".join(value)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def evaluator_args(cfg: RunConfig, target_pairs: list[str]) -> list[str]:
    """What an evaluator started elsewhere (a Slurm task) takes from the run: the bus options every worker shares
    with it, and the target's options (NAME=VALUE pairs)."""
    return as_args(cfg, BUS_WORKER_OPTIONS) + [arg for pair in target_pairs for arg in ("--target-option", pair)]


def as_args(cfg: RunConfig, names: tuple[str, ...]) -> list[str]:
    """The command-line arguments that give another process these options of cfg (workers)."""
    values, args = cfg.flat(), []
    for name in names:
        value = values[name]
        if value is None:
            continue
        if isinstance(value, bool):
            args.append(flag_of(name) if value else "--no-" + flag_of(name)[2:])
        elif isinstance(value, list):
            for item in value:
                args += [flag_of(name), str(item)]
        else:
            args += [flag_of(name), str(value)]
    return args


def option_pairs(options: dict, prefix: str = "") -> list[str]:
    """The NAME=VALUE pairs option_values reads back as `options` (nested dicts as dotted names; JSON values,
    which TOML reads the same for strings, numbers, booleans and lists)."""
    pairs = []
    for name, value in options.items():
        if isinstance(value, dict):
            pairs += option_pairs(value, f"{prefix}{name}.")
        else:
            pairs.append(f"{prefix}{name}={json.dumps(value)}")
    return pairs


def option_values(pairs: list[str], flag: str = "--search-option") -> dict:
    """NAME=VALUE pairs (--search-option, --target-option) as options; VALUE is read as TOML (3, 0.5, true, "x"),
    else taken as a string; a dotted NAME (limits.wall_s=60) sets one field of a nested option."""
    out: dict = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        keys = [k.strip() for k in name.split(".")]
        if not sep or not all(keys):
            raise ConfigError(f"{flag} {pair!r}: write NAME=VALUE")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        into = out
        for key in keys[:-1]:
            into = into.setdefault(key, {})
            if not isinstance(into, dict):
                raise ConfigError(f"{flag} {pair!r}: {key} is set to a value and to fields")
        into[keys[-1]] = value
    return out



def policy_flags(args: list[str], policy: str | None) -> dict:
    """The options of a non-default policy given as flags (`--search greedy --menu-size 3`): the arguments the
    command line did not know, read against that policy's declared options (a bool is --name / --no-name, any
    other type --name VALUE or --name=VALUE, VALUE read as in --search-option). Anything else is an error that
    names what the policy offers."""
    policy = policy or DEFAULT_POLICY
    if policy == DEFAULT_POLICY:        # its options are declared flags already: what is left is unknown
        raise ConfigError(f"no such option: {args[0]} (`launch.py run --help` lists them)")
    try:
        declared = policy_options(policy)
    except UnknownPolicyError as exc:
        raise ConfigError(str(exc)) from None
    offered = {flag_of(name): (name, plain_type(hint)) for name, (hint, _) in declared.items()}
    pairs, rest = [], list(args)
    while rest:
        arg = rest.pop(0)
        flag, eq, text = arg.partition("=")
        negated = flag.startswith("--no-") and offered.get("--" + flag[5:], (None, None))[1] is bool
        name, kind = offered.get("--" + flag[5:] if negated else flag, (None, None))
        if name is None:
            close = difflib.get_close_matches(flag, list(offered), n=1)
            choices = ", ".join(offered) or "none"
            raise ConfigError(f"no such option: {arg} (search policy {policy!r} takes {choices}"
                              + (f"; did you mean {close[0]}?)" if close else ")"))
        if kind is bool:
            if eq:
                raise ConfigError(f"{flag} is a switch: write {flag} or --no-{flag[2:]}")
            pairs.append(f"{name}={'false' if negated else 'true'}")
            continue
        if not eq:
            if not rest:
                raise ConfigError(f"{flag} needs a value")
            text = rest.pop(0)
        pairs.append(f"{name}={text}")
    return option_values(pairs, "--" + policy)
