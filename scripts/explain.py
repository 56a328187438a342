"""Print what the shared analysis knows about the calls on one line of a file:
a developer's tool for reading a finding (or a miss) in its context.

    python scripts/explain.py path/to/file.py 42
"""

from __future__ import annotations

import sys

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.analysis import Analysis


def main(argv) -> int:
    path, line = argv[1], int(argv[2])
    source = open(path, encoding="utf-8").read()
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    a = Analysis(module, path, source)
    code = module.code_for_node
    print(
        f"file: test={a.roles.test_file} accelerator_in_play={a.places.accelerator_in_play()} "
        f"selects_device={a.places.selects_device()} silenced={a.places.silenced}"
    )
    for call in a.facts.calls:
        pos = positions.get(call.node)
        if pos is None or pos.start.line != line:
            continue
        site = call.site
        print(f"\ncall {code(call.node)[:80]!r}  qualname={call.qualname} scope={site.scope!r}")
        print(
            f"  roles: excluded={a.roles.excluded(site)} does_work={a.roles.does_work(site)} "
            f"work_loop={a.roles.work_loop(site)!r} main_guard={site.in_main_guard}"
        )
        loop = a.loops.step_loop(site)
        print(f"  loops: step_loop={loop!r} hot={a.loops.hot_context(site)!r}")
        for cur in site.loop.chain() if site.loop else ():
            print(
                f"    {cur!r}: role={a.loops.role(cur)} data={a.loops.is_data_loop(cur)} "
                f"epoch={a.loops.is_epoch_loop(cur)} direct={a.loops.direct_hot(cur)} trains={a.loops.trains(cur)}"
            )
        mc = a.values.model_call(call)
        if mc is not None:
            print(
                f"  forward of {code(mc.model)} known={mc.known} place={a.places.model_place(mc.model, site)} "
                f"context={a.grad.inference_context(mc)!r} guarded={a.grad.guarded(site)} "
                f"grad_needed={a.grad.grad_needed(call)}"
            )
        print(
            f"  loss={a.values.is_loss_call(call)} kind={a.values.call_kind(call)} "
            f"tensor_place={a.places.tensor_place(call.node, site)}"
        )
        if call.receiver is not None:
            print(
                f"  receiver {code(call.receiver)[:60]!r}: kind={a.values.expr_kind(call.receiver, site)} "
                f"tensor_place={a.places.tensor_place(call.receiver, site)}"
            )
        for arg in call.node.args:
            print(
                f"  arg {code(arg.value)[:60]!r}: kind={a.values.expr_kind(arg.value, site)} "
                f"tensor_place={a.places.tensor_place(arg.value, site)}"
            )
        for expr in [arg.value for arg in call.node.args] + ([call.receiver] if call.receiver is not None else []):
            print(f"  value {code(expr)[:60]!r}: {a.value_model.at(expr, site)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
