#!/usr/bin/env python3
"""How step, latency, min-speech and min-silence trade announcement delay against accuracy.

Runs `scripts/evaluation/evaluate.py --json` (the streaming logic of the element, `speakerseg
changes`, scored with pyannote.metrics against the human RTTM) once per setting, varying one knob at
a time around the defaults (step 1 s, latency 2 s, min-speech 0.3 s, min-silence 0.8 s), then

  * plots F1@0.5, purity, coverage and the announcement delay against each knob (docs/tuning.png);
  * writes the numbers, with this command line, between the tuning-table markers of docs/tuning.md.

  .venv/bin/python3 scripts/evaluation/plot_tuning.py [--sets train development sample] [--jobs 2]
                                           [--results results.json] [--replot]

--results keeps the raw rows so that --replot can redraw the figure and the table without running
anything. Each evaluate.py run uses one engine thread and --jobs runs go side by side: on a busy
2-core machine two OpenMP threads per run spin against each other and take several times longer.
"""
import argparse
import concurrent.futures
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULTS = {"step": 1.0, "latency": 2.0, "min_speech": 0.3, "min_silence": 0.8}  # core/streaming/stream_settings.h
GRID = {
    "latency": [0.5, 1.0, 2.0, 3.0, 5.0],
    "step": [0.5, 1.0, 1.5, 2.0],
    "min_speech": [0.1, 0.2, 0.3, 0.5],
    "min_silence": [0.3, 0.5, 0.8, 1.2],
}
LABELS = {"latency": "latency (s)", "step": "step (s)", "min_speech": "min-speech (s)",
          "min_silence": "min-silence (s)"}
BEGIN, END = "<!-- tuning-table:begin -->", "<!-- tuning-table:end -->"


def settings_to_run():
    """Every distinct setting of the grid (the defaults appear once)."""
    seen, out = set(), []
    for knob, values in GRID.items():
        for v in values:
            s = dict(DEFAULTS, **{knob: v})
            key = tuple(sorted(s.items()))
            if key not in seen:
                seen.add(key)
                out.append(s)
    return out


def evaluate(settings, sets, speakerseg):
    cmd = [sys.executable, str(ROOT / "scripts" / "evaluation" / "evaluate.py"), "--json",
           "--threads", "1",
           "--speakerseg", speakerseg, "--sets", *sets, "--latency", f"{settings['latency']:g}", "--step", f"{settings['step']:g}",
           "--min-speech", f"{settings['min_speech']:g}", "--min-silence", f"{settings['min_silence']:g}"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"plot_tuning: {' '.join(cmd)} failed:\n{run.stderr}")
    out = run.stdout
    return [dict(json.loads(line), **settings) for line in out.splitlines() if line.strip()]


def curve(rows, knob, set_name):
    """The rows of one set where every knob but `knob` is at its default, sorted by `knob`."""
    pick = [r for r in rows if r["set"] == set_name
            and all(abs(r[k] - v) < 1e-9 for k, v in DEFAULTS.items() if k != knob)]
    return sorted(pick, key=lambda r: r[knob])


def plot(rows, sets, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    colors = {"F1@0.5": "tab:blue", "purity": "tab:green", "coverage": "tab:orange",
              "delay mean": "tab:red", "delay p95": "tab:purple"}
    styles = {"train": "-", "development": "--", "sample": ":"}
    fig, axes = plt.subplots(2, len(GRID), figsize=(4.2 * len(GRID), 7.4), sharey="row")
    for col, knob in enumerate(GRID):
        top, bottom = axes[0][col], axes[1][col]
        for set_name in sets:
            c = curve(rows, knob, set_name)
            x = [r[knob] for r in c]
            for m in ("F1@0.5", "purity", "coverage"):
                top.plot(x, [r[m] for r in c], styles.get(set_name, "-"), color=colors[m], marker="o",
                         markersize=4)
            for m, marker in (("delay mean", "o"), ("delay p95", "^")):
                bottom.plot(x, [r[m] for r in c], styles.get(set_name, "-"), color=colors[m],
                            marker=marker, markersize=4)
        for ax in (top, bottom):
            ax.axvline(DEFAULTS[knob], color="grey", linewidth=0.8, alpha=0.6)
            ax.grid(alpha=0.3)
        top.set_title(f"{LABELS[knob]}, others at default")
        top.set_ylim(0, 1.02)
        bottom.set_xlabel(LABELS[knob])
    axes[0][0].set_ylabel("score (higher is better)")
    axes[1][0].set_ylabel("announcement delay (s)")
    # One legend for the figure: colour = quantity, line style = recording set.
    handles = [Line2D([], [], color=c, marker="o", markersize=4, label=m) for m, c in colors.items()]
    handles += [Line2D([], [], color="black", linestyle=styles.get(s, "-"), label=f"set: {s}") for s in sets]
    handles.append(Line2D([], [], color="grey", linewidth=0.8, alpha=0.6, label="default"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9, frameon=False)
    fig.suptitle("speakerchange: accuracy (pyannote.metrics, tolerance 0.5 s) and announcement delay "
                 "against each knob", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)


def table(rows, sets, command):
    cols = ["purity", "coverage", "F1@0.5", "F1@0.25", "delay mean", "delay p95", "timed changes"]
    lines = [BEGIN, "", "```sh", command, "```", ""]
    for knob in GRID:
        lines += [f"**{LABELS[knob]}**, the other knobs at their defaults:", "",
                  f"| set | {knob.replace('_', '-')} | " + " | ".join(cols) + " |",
                  "|---|---:|" + "---:|" * len(cols)]
        for set_name in sets:
            for r in curve(rows, knob, set_name):
                cells = [f"{r[c]:.2f} s" if c.startswith("delay") else
                         (str(r["changes"]) if c == "timed changes" else f"{r[c]:.2f}") for c in cols]
                mark = " (default)" if abs(r[knob] - DEFAULTS[knob]) < 1e-9 else ""
                lines.append(f"| {set_name} | {r[knob]:g}{mark} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines + [END])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["train", "development", "sample"])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "docs" / "tuning.png"))
    ap.add_argument("--doc", default=str(ROOT / "docs" / "tuning.md"))
    ap.add_argument("--speakerseg", default=str(ROOT / "build" / "tools" / "speakerseg"))
    ap.add_argument("--results", help="JSON file for the raw rows (written after a run, read by --replot)")
    ap.add_argument("--replot", action="store_true", help="redraw from --results without running")
    args = ap.parse_args()

    if args.replot:
        saved = json.loads(pathlib.Path(args.results).read_text())
        rows, command = saved["rows"], saved["command"]
    else:
        # Without --results (where the rows went), so that the command shown reruns exactly this.
        shown, argv = [], iter(sys.argv[1:])
        for a in argv:
            if a == "--results":
                next(argv, None)
            elif not a.startswith("--results="):
                shown.append(a)
        command = " ".join([".venv/bin/python3 scripts/evaluation/plot_tuning.py"] + shown)
        todo = settings_to_run()
        rows = []
        with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            # A private copy: a rebuild during the run must not swap the program under it.
            speakerseg = shutil.copy2(args.speakerseg, pathlib.Path(tmp) / "speakerseg")
            for i, got in enumerate(pool.map(lambda s: evaluate(s, args.sets, speakerseg), todo), 1):
                print(f"plot_tuning: {i}/{len(todo)} settings", file=sys.stderr, flush=True)
                rows += got
        if args.results:
            pathlib.Path(args.results).write_text(json.dumps({"command": command, "rows": rows}, indent=1))

    plot(rows, args.sets, args.out)
    block = table(rows, args.sets, command)
    doc = pathlib.Path(args.doc)
    text = doc.read_text() if doc.exists() else f"# Tuning\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        sys.exit(f"plot_tuning: {doc} has no {BEGIN} ... {END} block to fill")
    head, rest = text.split(BEGIN, 1)
    doc.write_text(head + block + rest.split(END, 1)[1])
    print(f"plot_tuning: wrote {args.out} and the table in {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
