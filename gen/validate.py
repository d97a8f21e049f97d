"""One validation of an accelerator, behind every command.

A loaded accelerator file has passed the schema (:mod:`fcircnn.models.config`: keys, types,
the hardware's limits, shapes, the channel-tile rule, every layer placed on a core).
:func:`validate_accelerator` adds what only the generator knows, in the order a build meets it:
the compiler's plan of the network on the cores (:func:`~fcircnn.gen.plan.plan_network`:
buffers, descriptor fields, the DDR image), the hardware's constructors
(:meth:`~fcircnn.hw.accelerator.Accelerator.from_config`), the Vivado target
(:class:`~fcircnn.gen.vivado.VivadoTarget`) and the device's resources under a cap
(:func:`~fcircnn.gen.estimate.estimate_resources`). ``fcircnn check`` runs it with the
estimator's default cap, so it refuses everything ``compile``, ``generate``, ``sim``,
``golden`` or ``estimate`` would; they run it with their own cap (the whole device, or
``--cap``). It takes milliseconds, even for a paper-size design.
"""

from __future__ import annotations

import gc
import warnings

from fcircnn.models.config import AcceleratorConfig, ConfigError, Problem

from .estimate import RESOURCE_NAMES, ResourceEstimate, estimate_resources, format_cap
from .plan import CompileError, NetworkPlan, plan_network
from .vivado import VivadoTarget

__all__ = ["HardwareUnavailable", "hardware_installed", "over_cap_message",
           "validate_accelerator"]


class HardwareUnavailable(RuntimeError):
    """The hardware package cannot be imported: an installation problem, not bad input."""


def hardware_installed() -> bool:
    """Whether the hardware generator's dependency (Amaranth: the ``[hw]`` extra) is
    installed."""
    import importlib.util

    return importlib.util.find_spec("amaranth") is not None


def over_cap_message(est: ResourceEstimate, acc: AcceleratorConfig, cap: float) -> str | None:
    """``None`` when ``est`` fits ``cap`` of every resource of ``acc``'s device, else one line
    naming the binding resource (the one furthest over the cap) with its need and the limit,
    then any other resource over the cap."""
    resources = acc.device.resources
    use = est.utilization(resources)
    over = sorted((name for name in RESOURCE_NAMES if use[name] > cap),
                  key=lambda name: -use[name])
    if not over:
        return None
    total = est.total

    def need(name: str) -> str:
        value = getattr(total, name)
        value = f"{value:g}" if isinstance(value, float) else str(value)
        return f"{name} {value} of {getattr(resources, name)} ({use[name]:.0%})"

    under = "" if cap == 1 else f" under the {format_cap(cap)} cap"
    text = (f"{acc.name} does not fit {acc.device.part}{under}: binding resource "
            f"{need(over[0])}")
    if len(over) > 1:
        text += "; also over: " + ", ".join(need(name) for name in over[1:])
    return text


def _construct(top: type, acc: AcceleratorConfig) -> str | None:
    """Build ``top`` from ``acc`` (its constructors check every parameter) and discard it;
    return the constructors' objection, if any.

    The hierarchy is never elaborated, so Amaranth's "created but never used" warning is
    silenced for it, and the objects are collected before the warning filter is restored.
    """
    from amaranth.hdl import UnusedElaboratable

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        try:
            top.from_config(acc)
            problem = None
        except (TypeError, ValueError) as exc:
            problem = str(exc)
        gc.collect()
    return problem


def validate_accelerator(acc: AcceleratorConfig, *, cap: float | None = 1.0,
                         hardware: bool = True) -> NetworkPlan:
    """Check that ``acc`` can be compiled, built and placed on its device.

    Parameters
    ----------
    acc : AcceleratorConfig
        Loaded and bound (:func:`~fcircnn.models.config.load_accelerator`).
    cap : float or None
        Largest share of each device resource the design may use, in (0, 1]; ``None`` skips
        the resource check (``fcircnn estimate`` prints the figures before refusing).
    hardware : bool
        Also run the hardware's constructors (needs the ``[hw]`` extra); without them the
        schema's rules and the compiler's plan, which state the same limits, still apply.

    Returns
    -------
    NetworkPlan
        The compiler's plan of the network (no data).

    Raises
    ------
    ConfigError
        Against the accelerator's file: the first problem found, naming the layer or core and
        the limit.
    HardwareUnavailable
        If :mod:`fcircnn.hw` cannot be imported.
    """
    file = str(acc.path) if acc.path is not None else acc.name

    def refuse(message: str) -> ConfigError:
        return ConfigError(file, [Problem("", message)])

    try:
        plan = plan_network(acc)
    except CompileError as exc:
        raise refuse(str(exc)) from None
    if hardware:
        try:
            from fcircnn.hw.accelerator import Accelerator
        except ImportError as exc:
            raise HardwareUnavailable(f"the accelerator top is not available ({exc}); the "
                                      "installation is incomplete") from None
        problem = _construct(Accelerator, acc)
        if problem is not None:
            raise refuse(f"the hardware cannot be built: {problem}")
    try:
        VivadoTarget.from_config(acc)
    except ValueError as exc:
        raise refuse(str(exc)) from None
    if cap is not None:
        message = over_cap_message(estimate_resources(acc), acc, cap)
        if message is not None:
            raise refuse(message)
    return plan
