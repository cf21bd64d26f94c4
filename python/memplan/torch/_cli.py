"""The exporter's command line: `memplan export` and `memplan measure`."""
import argparse
import json
import sys
from typing import List, Optional

from .. import symbolic
from ._common import PROGRESS, default_partition, min_cut_rematerialization_partition
from ._export import FOLD_MODES, export, export_symbolic, parallel_jobs
from ._graph import dumps
from ._measure import measure
from ._prepare import DTYPES, cast_inputs, prepare_model
from ._spec import example_inputs, load_model, make_target
from ._workspace import CPU_ISAS


def _shape(text):
    try:
        return tuple(int(s) for s in text.replace("x", ",").split(",") if s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected e.g. 3,64,64") from None


def _setup(args):
    meta = getattr(args, "device", "cpu") != "cpu"
    model = load_model(args.model, device="meta" if meta else None)
    prepare_model(model, dtype=args.dtype, trainable=args.trainable, lora=args.lora,
                  gradient_checkpointing=args.hf_gradient_checkpointing)
    inputs = cast_inputs(example_inputs(model, args.batch, args.input_shape), args.dtype)
    return model, inputs, make_target(model, inputs)


def _step_options(p):
    """The options that say which step the user trains (export and measure)."""
    low = [k for k in DTYPES if k != "float32"]
    p.add_argument("--dtype", choices=low, help="weights, buffers and float inputs in this "
                   "dtype (model.to(dtype)); default float32")
    p.add_argument("--autocast", choices=low, help="the step (forward and loss) under "
                   "torch.autocast with this dtype (the CPU's autocast policy)")
    p.add_argument("--trainable", metavar="REGEX", help="only parameters whose name matches "
                   "(re.search) train; the rest are frozen (no gradient)")
    p.add_argument("--lora", metavar="r=R,alpha=A,targets=NAME[,NAME...][,dropout=P]",
                   help="LoRA adapters through PEFT on the named modules; only they train "
                   "(needs memplan[hf])")
    p.add_argument("--hf-gradient-checkpointing", action="store_true",
                   help="the transformers model's own gradient_checkpointing_enable() "
                   "(non-reentrant), recomputed in the backward as eager does")
    p.add_argument("--hold-outputs", action=argparse.BooleanOptionalAction, default=True,
                   help="the loop keeps the model's output through the backward (`out = "
                   "model(x); loss_fn(out, y).backward()`; default, never under-predicts "
                   "it); --no-hold-outputs: it drops the output once the loss is computed "
                   "(HF Trainer, Lightning)")
    p.add_argument("--compile", choices=("aot_eager", "inductor"),
                   help="the step under torch.compile(model, backend=...), forward and loss "
                   "as one graph (docs/compile.md; torch 2.x; the model must compile to one "
                   "graph)")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="memplan", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("export", "measure"):
        p = sub.add_parser(name)
        p.add_argument("model", help="torchvision:NAME, hf:ARCH[:k=v,...], "
                       "hf:path/to/config.json[:k=v,...] or package.module:factory")
        p.add_argument("--batch", type=int, required=True)
        _step_options(p)
        p.add_argument("--input-shape", type=_shape, default=None,
                       help="per-sample input shape, e.g. 3,64,64 (default: the model's "
                            "example_input, else 3,224,224)")
    ex = sub.choices["export"]
    ex.add_argument("-o", "--output", required=True)
    ex.add_argument("--style", choices=("joint", "forward"), default="joint")
    ex.add_argument("--static", action="store_true",
                    help="integer shapes at --batch only (default: symbols batch, and seq "
                         "for sequence models, solved from a few exports at nearby sizes)")
    ex.add_argument("--seq", type=int, help="sequence length for sequence models "
                                            "(default: the model's)")
    ex.add_argument("--device", default="cpu", choices=("cpu", "meta", "cuda", "h100", "h200",
                                                        "a100"),
                    help="cpu: traced on this CPU's tensors, for an eager step on the CPU; "
                         "meta: traced without data (nothing allocated, no step run), for the "
                         "CPU; cuda, h100, h200, a100: traced without data, for an eager step "
                         "on that GPU (its dropout kernel; no CPU scratch)")
    ex.add_argument("--measure-workspace", action="store_true",
                    help="per-op scratch measured by replaying the step on this CPU "
                         "(--device cpu only) instead of the scratch rules "
                         "(memplan/torch/_workspace.py)")
    ex.add_argument("--cpu-isa", choices=tuple(CPU_ISAS),
                    help="the CPU whose oneDNN kernels the scratch rules model (default: "
                         "this machine's, torch.backends.cpu.get_cpu_capability()); the "
                         "graph's source.workspace.isa names it")
    ex.add_argument("--fold-layers", choices=FOLD_MODES, default="auto",
                    help="auto: a transformers model's stack of alike layers is traced at 3, "
                         "4 and 5 layers and the rest extrapolated, checked (the same graph "
                         "as tracing them all); always: any model's stack; never: trace "
                         "every layer")
    ex.add_argument("--measure-times", action="store_true",
                    help="each op's time_us measured by replaying the step's graphs on this "
                         "CPU, one thread (--device cpu --static only): memplan plans with "
                         "these times instead of its roofline")
    ex.add_argument("--partition", choices=("default", "min_cut"), default="default",
                    help="aot partitioner (joint style): default saves what the backward "
                         "reads; min_cut is PyTorch's rematerializing partitioner")
    ms = sub.choices["measure"]
    ms.add_argument("--plan", help="memplan.plan/1 to apply before measuring: its modules "
                                   "(memplan plan --granularity module) or its selective "
                                   "checkpointing policies (--granularity sac)")
    ms.add_argument("--json", help="write the report here (also printed)")
    for p in (ex, ms):
        p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    args = ap.parse_args(argv)
    PROGRESS.enabled = sys.stderr.isatty() and not args.quiet
    try:
        return _run(args)
    except Exception as e:  # noqa: BLE001 - bad input is exit 2 naming the model
        print(f"memplan {args.cmd}: {args.model}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


def _run(args):
    try:
        return _run_command(args)
    finally:
        PROGRESS.done()


def _run_command(args):
    PROGRESS("building " + args.model)
    model, inputs, target = _setup(args)
    if args.cmd == "export":
        pf = (default_partition if args.partition == "default"
              else min_cut_rematerialization_partition)
        parts = args.model.split(":")
        name = ":".join(parts[:2]) if parts[0] == "hf" else parts[-1]
        if args.measure_workspace and args.device != "cpu":
            raise ValueError("--measure-workspace replays the step on this CPU: it needs "
                             "--device cpu")
        kw = {"target_device": "cpu" if args.device in ("cpu", "meta") else "cuda",
              "workspace": "measure" if args.measure_workspace else "rules",
              "autocast": args.autocast, "hold_outputs": args.hold_outputs,
              "compile": args.compile}
        if args.cpu_isa:
            kw["cpu_isa"] = args.cpu_isa  # export() refuses it with --measure-workspace
        if args.compile and args.partition != "default":
            raise ValueError("--partition with --compile: the compiled step uses its "
                             "backend's partitioner")
        if args.measure_times:
            if args.device != "cpu" or not args.static:
                raise ValueError("--measure-times replays the step on this CPU at one size: it "
                                 "needs --device cpu and --static")
            kw["times"] = True
        if args.static:
            if args.seq is not None:
                inputs = cast_inputs(example_inputs(model, args.batch, args.input_shape,
                                                    seq=args.seq), args.dtype)
                target = make_target(model, inputs)
            graph, stats = export(model, inputs, target, style=args.style, name=name,
                                  partition_fn=pf, with_stats=True, **kw)
        else:
            try:
                graph, stats = export_symbolic(model, args.batch, args.input_shape, seq=args.seq,
                                               name=name, style=args.style, partition_fn=pf,
                                               input_dtype=args.dtype,
                                               jobs=parallel_jobs(model, kw),
                                               fold_layers=args.fold_layers, **kw)
            except (symbolic.SymbolicError, ValueError) as e:
                print(f"memplan export: {args.model}: {e} (export --static writes integer "
                      "shapes)", file=sys.stderr)
                return 2
        with open(args.output, "w") as f:
            f.write(dumps(graph))
        fw = sum(1 for o in graph["ops"] if o["phase"] == "forward")
        print(json.dumps({"output": args.output, "ops": len(graph["ops"]), "forward_ops": fw,
                          "tensors": len(graph["tensors"]), **stats}, indent=1))
        return 0
    PROGRESS("measuring one " + ("compiled" if args.compile else "eager") + " step")
    report = measure(model, inputs, target, plan=args.plan, autocast=args.autocast,
                     hold_outputs=args.hold_outputs, compile=args.compile)
    report = {"model": args.model, "batch": args.batch, **report}
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
