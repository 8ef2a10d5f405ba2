"""The options of a run: one msgspec model in sections (task, search, models, budget, bus, local, cluster),
checked for type and range by msgspec with one-line errors. Each option is declared once, with its help, its extra
flags, its resume rule and its bounds; the command line of `run` and `worker` (launch.py), the keys of a --config TOML
file and the worker command line are all built from these declarations.

Flags are flat (--beam, --max-cost); a TOML file uses the sections ([budget] max_cost = 5) or the flat names.
A search policy's own options (beam: beam, plans, codes, dropout) are its section, search.options, declared by
the policy's Config (agents/engine/policy.py); the built-in policies' options are flags too.
"""
from __future__ import annotations

import tomllib
import typing
from pathlib import Path
from typing import Any

import msgspec
import psutil

from autocomp_zmq.agents.engine.policy import (DEFAULT_POLICY, SearchSettings, UnknownPolicyError, config_class,
                                               policy_class)
from autocomp_zmq.agents.run.configtext import explain
from autocomp_zmq.agents.workers.llm.specs import BATCH_LOOK_S, MAX_WAIT_S
from autocomp_zmq.protocols.control import MAX_LEASE_S
from autocomp_zmq.protocols.envelope import convert
from autocomp_zmq.agents.run.runsections import (  # noqa: F401 - the declarations, re-exported
    EVALUATORS_PER_CORE, EXTEND, FIXED, LOCAL, SECTIONS, SECURITY, Budget, Bus, Cluster, ConfigError, Local, Models,
    Search, Task, bounded, opt)


class RunConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    task: Task = msgspec.field(default_factory=Task)
    search: Search = msgspec.field(default_factory=Search)
    models: Models = msgspec.field(default_factory=Models)
    budget: Budget = msgspec.field(default_factory=Budget)
    bus: Bus = msgspec.field(default_factory=Bus)
    local: Local = msgspec.field(default_factory=Local)
    cluster: Cluster = msgspec.field(default_factory=Cluster)

    @property
    def model_lease_s(self) -> float:
        """A model job's lease, unless set explicitly: its two calls (agents/workers/llm/agent.py: a cut-off answer
        is asked again), each tried retries + 1 times, with the longest wait between tries
        (agents/workers/llm/faults.py)."""
        m = self.models
        tries = m.call_retries + 1
        if m.llm_lease_s is not None:
            return m.llm_lease_s
        if m.batch_window_s is not None:      # each try waits for a batch (agents/workers/llm/batches.py)
            lease = 2 * tries * (m.batch_window_s + BATCH_LOOK_S + m.call_timeout_s) + 60.0
        else:
            lease = 2 * (tries * m.call_timeout_s + m.call_retries * MAX_WAIT_S) + 60.0
        return min(lease, MAX_LEASE_S)

    @classmethod
    def of(cls, **flat) -> "RunConfig":
        """A checked configuration from options by flag name (launch.py, tests, benchmarks)."""
        return build(sectioned(flat))

    def to_dict(self) -> dict[str, Any]:
        """The sections as plain data (what a run stores, and reads back with build)."""
        return msgspec.to_builtins(self)

    def flat(self) -> dict[str, Any]:
        """Every option by flag name, the policy's own included."""
        values = {name: getattr(getattr(self, section), name) for name, (section, _) in OPTIONS.items()}
        return {**values, **self.search.options}


def declared_options(cls: type) -> dict[str, tuple[Any, dict]]:
    """name -> (type, declaration) of a struct's options (annotated with opt)."""
    out = {}
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        meta = next((m for m in getattr(hint, "__metadata__", ()) if isinstance(m, msgspec.Meta) and m.extra), None)
        if meta is not None:
            out[name] = (hint.__origin__, meta.extra)
    return out


OPTIONS: dict[str, tuple[str, dict]] = {name: (section, decl) for section, cls in SECTIONS.items()
                                        for name, (_, decl) in declared_options(cls).items()}
LEGACY_KEYS = {"models": "model", "code_models": "code_model", "search": "policy"}   # names of earlier versions


def policy_options(policy: str = DEFAULT_POLICY) -> dict[str, tuple[Any, dict]]:
    """A policy's own options (name -> (type, declaration)): the fields its Config adds to SearchSettings."""
    shared = set(SearchSettings.__struct_fields__)
    declared = declared_options(config_class(policy_class(policy)))
    return {name: spec for name, spec in declared.items() if name not in shared}


def sectioned(flat: dict) -> dict:
    """Options by flag name (a command line, a flat TOML file, a run of an earlier version) as sections; a name
    no section and no built-in policy declares goes to search.options, for the chosen policy to accept or refuse.
    Tables that are sections are taken as they are."""
    out: dict[str, dict] = {}
    for key, value in flat.items():
        if key in SECTIONS and isinstance(value, dict):
            section = out.setdefault(key, {})
            extra = value.get("options") if key == "search" else None
            section.update({k: v for k, v in value.items() if k != "options"})
            if extra is not None:
                section.setdefault("options", {}).update(extra)
            continue
        key = LEGACY_KEYS.get(key, key)
        if key == "target_options":
            out.setdefault("task", {})[key] = value
        elif key in OPTIONS:
            out.setdefault(OPTIONS[key][0], {})[key] = value
        else:
            out.setdefault("search", {}).setdefault("options", {})[key] = value
    return out


def build(data: dict) -> RunConfig:
    """A checked configuration from sections; a wrong type or value is a one-line ConfigError naming the option."""
    try:
        cfg = convert(data, RunConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(explain(exc, data, SECTIONS)) from None
    cap = max_local_evaluators()
    if cfg.local.evaluators is not None and cfg.local.evaluators > cap:
        raise ConfigError(f"evaluators must be between 0 and {cap} on this host ({EVALUATORS_PER_CORE} per core), "
                          f"not {cfg.local.evaluators}; start workers on other hosts for more")
    cfg.search.options = _policy_section(cfg.search.policy, cfg.search.options)
    return cfg


def _policy_section(policy: str, given: dict) -> dict:
    """The policy's own options, checked by its Config and completed with its defaults."""
    try:
        config = config_class(policy_class(policy))
    except UnknownPolicyError as exc:
        raise ConfigError(f"--search: {exc}") from None
    own = policy_options(policy)
    unknown = [k for k in given if k not in own]
    if unknown:
        raise ConfigError(f"{', '.join(flag_of(k) for k in unknown)}: not an option of the search policy {policy} "
                          f"(its options: {', '.join(own) or 'none'})")
    try:
        checked = convert(given, config)
    except msgspec.ValidationError as exc:
        raise ConfigError(explain(exc, given, SECTIONS)) from None
    return {name: getattr(checked, name) for name in own}


def from_toml(path: Path) -> dict:
    """A config file's options, as sections (checked when the configuration is built)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from None
    flat = set(OPTIONS) | set(policy_options()) | {"search"}    # search = "NAME": the policy, as before 0.3
    unknown = sorted(k for k, v in data.items() if not (k in SECTIONS and isinstance(v, dict)) and k not in flat)
    if unknown:
        hints = [f"{k} (did you mean {LEGACY_KEYS[k]}?)" if k in LEGACY_KEYS else k for k in unknown]
        raise ConfigError(f"unknown keys in {path}: {', '.join(hints)}; the keys are the sections "
                          f"{', '.join(SECTIONS)} or the flags of `run` with underscores")
    return sectioned(data)


def merge(base: dict, over: dict) -> dict:
    """Sections of `over` laid over those of `base`, option by option."""
    out = {section: dict(values) for section, values in base.items()}
    for section, values in over.items():
        target = out.setdefault(section, {})
        for key, value in values.items():
            target[key] = {**target.get(key, {}), **value} if key in ("options", "target_options") else value
    return out


def from_saved(saved: dict) -> dict:
    """A configuration stored by a run, as sections. Runs before 0.3 stored flat names, and their `dropout` was
    the probability of keeping a menu option (today: of dropping it)."""
    if any(isinstance(saved.get(s), dict) for s in SECTIONS):
        return sectioned(saved)
    old = {LEGACY_KEYS.get(k, k): v for k, v in saved.items()}
    if isinstance(old.get("dropout"), (int, float)):
        old["dropout"] = round(1.0 - old["dropout"], 12)
    return sectioned({k: v for k, v in old.items() if k in OPTIONS or k in policy_options()})


def flat_view(saved: dict) -> dict:
    """A stored configuration by flag name, whatever version stored it (show, report, runs read this)."""
    if any(isinstance(saved.get(s), dict) for s in SECTIONS):
        out = {}
        for section in SECTIONS:
            values = dict(saved.get(section) or {})
            out.update(values.pop("options", None) or {})
            out.update(values)
        return out
    return {LEGACY_KEYS.get(k, k): v for k, v in saved.items()}


def max_local_evaluators() -> int:
    return EVALUATORS_PER_CORE * (psutil.cpu_count(logical=True) or 1)


def resume_config(saved: dict, given: dict) -> RunConfig:
    """The saved configuration with the options given (by flag name) that a resume may change; any other
    option that differs from the saved one is an error naming it."""
    merged = from_saved(saved)
    current = flat_view(merged)
    for key, value in given.items():
        key = LEGACY_KEYS.get(key, key)
        rule = OPTIONS[key][1]["resume"] if key in OPTIONS else FIXED
        if rule in (EXTEND, LOCAL):
            merged = merge(merged, sectioned({key: value}))
            continue
        if current.get(key) == value:
            continue
        flag = flag_of(key)
        if rule == SECURITY:
            raise ConfigError(f"{flag} {value} conflicts with the resumed run's {key} {current.get(key)!r}: a "
                              "resumed run keeps its endpoint and encryption so that its workers reconnect")
        extendable = [flag_of(k) for k, (_, d) in OPTIONS.items() if d["resume"] == EXTEND]
        raise ConfigError(f"{flag} cannot change on resume (the run has {key} = {current.get(key)!r}): it would "
                          f"change the search; only {', '.join(extendable)} can extend a run")
    return build(merged)


def flag_of(name: str) -> str:
    declared = OPTIONS[name][1].get("flag") if name in OPTIONS else {"target_options": "--target-option"}.get(name)
    return declared or "--" + name.replace("_", "-")
