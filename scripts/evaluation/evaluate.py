#!/usr/bin/env python3
"""Speaker-change accuracy on the annotated recordings of ../shared/data/pyannote-debug and on
broadcast-like programmes built from ../shared/data/librispeech.

Runs `speakerseg changes` (the same streaming logic as the speakerchange element: 10 s windows
every --step, frames final --latency behind the newest audio) on every recording, and scores the
current-speaker timeline it announces against the human RTTM with pyannote.metrics:

  purity, coverage   SegmentationPurity / SegmentationCoverage, tolerance 0.5 s
  P, R, F1 @0.25/0.5 SegmentationPrecision / SegmentationRecall with that tolerance (boundaries are
                     segment ends, as pyannote.metrics defines them), F1 = 2PR / (P + R)
  delay mean / p95   seconds between a change and its announcement (changes announced before the
                     end of the file; at the end the rest is finalised at once)
  DER, confusion,    DiarizationErrorRate (no collar, overlap scored), optimal speaker mapping over
  missed, FA         each whole recording; the parts as fractions of all reference speech. The
                     announced timeline has one speaker at a time, so overlapped speech counts as
                     missed for everyone but the current speaker.
  labels / people    how many labels the announced timeline uses, and how many people speak
                     (each summed over a set's recordings)
  anchor recall, FA  where people are enrolled (the programmes' anchors and hosts, `reidentify`
                     on): the share of an enrolled person's reference speech announced with their
                     name, and the share of everyone else's speech announced with it
  ... as announced   the same on the timeline as the changes announced it, before any revision
                     (what a screen showed at the time): confusion, anchor recall and FA
  relabelled         the share of reference speech shown under a label that a revision changed
  wrong name         the share of all reference speech shown under an enrolled name that is not
                     the speaker's (revised, and as announced)
  anchor unnamed     the share of an enrolled person's speech shown under an anonymous label
                     (speaker-N: a voice not yet known; revised, and as announced)
  revision delay     p50 / p90 of the seconds from a revised change to its revision

Each metric is accumulated over the recordings of a set (pyannote.metrics' abs(metric)); with
--per-recording each recording gets its own row too, from its own components. `meetings` pools
all 13 annotated meetings (train, development and sample), the base of the leave-one-recording-out
figures in docs/accuracy.md: a check, neither to tune nor to report on. Besides the 30 s
recordings, the *-concat sets join them into recordings where the same people come back after
other meetings or silence (AMI speaker names are global, so the joined annotation says who
returns): train-concat and train-concat-more to tune on, development-concat to report. The
programmes-* sets are the broadcast-like programmes of scripts/evaluation/programmes.py (built into
--programmes if missing): programmes-train to tune on, programmes-development to report; with
`reidentify` on, each programme's anchors or hosts are enrolled from their enrolment clips
(`speakerseg enroll`) and the run gets the voiceprints.

  .venv/bin/python3 scripts/evaluation/evaluate.py [--sets train development sample meetings
                                         train-concat train-concat-more development-concat newcomer
                                         programmes-train programmes-development]
                                        [--latency 1 2 5 offline]
                                        [--reidentify off on] [--voice-threshold X]
                                        [--precision fp32 bf16 fp16-emulated bf16-emulated
                                                     tf32-emulated] [--per-recording]
                                        [--step 1] [--min-speech S] [--min-silence S] [--onset X]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
from pyannote.core import Annotation, Segment, Timeline
from pyannote.database.util import load_rttm, load_uem
from pyannote.metrics.diarization import DiarizationErrorRate
from pyannote.metrics.segmentation import (SegmentationCoverage, SegmentationPrecision,
                                           SegmentationPurity, SegmentationRecall)
from scipy.io import wavfile

import programmes

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "pyannote-debug"
SETS = {"train": "train", "development": "development", "sample": "sample"}
# Sets made of other sets, pooled (the docstring says what `meetings` is for).
POOLED = {"meetings": ("train", "development", "sample")}
PROGRAMMES = {"programmes-train": "train", "programmes-development": "development"}
RATE = 16000
# Recordings joined end to end ("silence:S" is S seconds of digital silence). Within each, people
# of the first part come back after others or after silence.
CONCATS = {
    "train-concat": {
        "trn00+trn04+trn01+sil+trn03": ["trn00", "trn04", "trn01", "silence:12", "trn03"],
        "trn07+trn06+trn08": ["trn07", "trn06", "trn08"],
        "trn02+trn09+trn01": ["trn02", "trn09", "trn01"],
    },
    # Four more joins of the train recordings, to tune on more than three: FEE083 back after
    # others; MEE067 and MÉO069 back after four others; all four of trn07 back after silence;
    # FEO066 back after others.
    "train-concat-more": {
        "trn06+trn04+trn09": ["trn06", "trn04", "trn09"],
        "trn03+trn05+trn00": ["trn03", "trn05", "trn00"],
        "trn08+sil+trn07": ["trn08", "silence:12", "trn07"],
        "trn01+trn06+trn02": ["trn01", "trn06", "trn02"],
    },
    "development-concat": {
        "dev00+trn05+dev01": ["dev00", "trn05", "dev01"],
        "dev00+sil+dev01": ["dev00", "silence:12", "dev01"],
    },
    # Neither tuning nor report: the case where the stitcher carries a label across a join onto a
    # newcomer (docs/identity.md, "How a newcomer is merged into a label").
    "newcomer": {
        "sample+trn05+sample": ["sample", "trn05", "sample"],
    },
}


def all_references():
    refs = {}
    for name in ("train", "development", "sample"):
        refs.update(load_rttm(str(DATA / f"{name}.rttm")))
    return refs


def build_concat(parts, uri, folder, refs):
    """Writes the joined recording; returns its annotation (speakers keep their AMI names)."""
    audio, ref, offset = [], Annotation(uri=uri), 0.0
    for part in parts:
        if part.startswith("silence:"):
            x = np.zeros(int(float(part.split(":")[1]) * RATE), dtype=np.float32)
        else:
            rate, x = wavfile.read(str(DATA / f"{part}.wav"))
            assert rate == RATE and x.ndim == 1, part
            x = x.astype(np.float32) / 32768 if x.dtype == np.int16 else x.astype(np.float32)
            for seg, _, who in refs[part].itertracks(yield_label=True):
                ref[Segment(seg.start + offset, seg.end + offset)] = who
        audio.append(x)
        offset += len(x) / RATE
    wav = pathlib.Path(folder) / f"{uri}.wav"
    wavfile.write(str(wav), RATE, np.concatenate(audio))
    return wav, ref, offset


def programme_recordings(folder):
    """The programmes of one split, built first if they are not there."""
    if not (folder / "programmes.json").exists():
        print(f"evaluate: building the programmes into {folder.parent}", file=sys.stderr)
        programmes.build(folder.parent)
    for uri in json.loads((folder / "programmes.json").read_text()):
        manifest = json.loads((folder / f"{uri}.json").read_text())
        enrolled = [(p["reader"], folder / p["enrolment"]["wav"]) for p in manifest["people"]
                    if p["enrolment"]]
        uem = Timeline([Segment(0, manifest["seconds"])], uri=uri)
        ref = load_rttm(str(folder / manifest["rttm"]))[uri]
        yield folder / manifest["wav"], ref, uem, enrolled


def recordings(args, set_name, folder):
    """(wav, reference, uem, enrolled) of every recording of a set; enrolled: (name, clip) of
    each person to enrol."""
    if set_name in PROGRAMMES:
        yield from programme_recordings(pathlib.Path(args.programmes) / PROGRAMMES[set_name])
        return
    if set_name in POOLED:
        for part in POOLED[set_name]:
            yield from recordings(args, part, folder)
        return
    if set_name in CONCATS:
        refs = all_references()
        for uri, parts in CONCATS[set_name].items():
            wav, ref, duration = build_concat(parts, uri, folder, refs)
            uem = Timeline([Segment(0, duration)], uri=uri)
            yield wav, ref, uem, []
        return
    refs = load_rttm(str(DATA / f"{SETS[set_name]}.rttm"))
    uem_file = DATA / f"{SETS[set_name]}.uem"
    uems = load_uem(str(uem_file)) if uem_file.exists() else {}
    for uri in sorted(refs):
        yield DATA / f"{uri}.wav", refs[uri], uems.get(uri), []


# `speakerseg changes --reidentify` options, as argparse names them (--voice-threshold X, ...).
IDENTITY_OPTIONS = ("voice_threshold", "enrolled_threshold", "voice_margin", "voice_lead",
                    "voice_lead_floor", "keep_floor_short", "keep_floor_long", "merge_threshold", "enrolled_merge_threshold",
                    "narrowband_shift", "takeover_threshold", "turn_gap", "evidence_seconds",
                    "decision_seconds", "clean_others")


def enrol(args, enrolled, uri, tmp):
    """A voiceprints file with each (name, clip) enrolled, or None when nobody is."""
    if not enrolled:
        return None
    prints = pathlib.Path(tmp) / f"{uri}.voiceprints.json"
    for name, clip in enrolled:
        subprocess.run([str(args.speakerseg), "enroll", "--model", args.model, "--name", name,
                        "--input", str(clip), "--voiceprints", str(prints)],
                       check=True, capture_output=True)
    return prints


def run_changes(args, wav, latency, reidentify, precision, tmp, voiceprints):
    rttm = pathlib.Path(tmp) / (wav.stem + ".rttm")
    cmd = [str(args.speakerseg), "changes", "--model", args.model, "--input", str(wav), "--rttm", str(rttm),
           "--step", str(args.step), "--threads", str(args.threads)]
    if precision != "fp32":
        cmd += ["--engine", "cpu", "--precision", precision]
    cmd += ["--offline"] if latency == "offline" else ["--latency", str(latency)]
    for opt in ("min_speech", "min_silence", "min_gap", "onset", "match_threshold", "switch_margin"):
        if getattr(args, opt) is not None:
            cmd += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
    if reidentify == "on":
        cmd += ["--reidentify"] + (["--voiceprints", str(voiceprints)] if voiceprints else [])
        for opt in IDENTITY_OPTIONS + ("max_speakers",):
            if getattr(args, opt) is not None:
                cmd += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    # Revisions rename earlier changes; the RTTM has them applied, the delays count changes only.
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    changes = [c for c in lines if "revises" not in c]
    revisions = [c for c in lines if "revises" in c]
    hyp = Annotation(uri=wav.stem)
    for line in rttm.read_text().splitlines():
        f = line.split()
        hyp[Segment(float(f[3]), float(f[3]) + float(f[4]))] = f[7]
    return hyp, changes, revisions, cmd


def as_announced(changes, hyp):
    """The current-speaker timeline as the changes announced it, before any revision: what a
    screen showed at the time. Each change holds until the next; the last until the end of the
    revised timeline (the end of the audio)."""
    end = max([s.end for s in hyp.get_timeline()] + [c["time"] for c in changes], default=0.0)
    shown = Annotation(uri=hyp.uri)
    for c, nxt in zip(changes, changes[1:] + [None]):
        stop = nxt["time"] if nxt else end
        if c["speaker"] and stop > c["time"]:
            shown[Segment(c["time"], stop)] = c["speaker"]
    return shown


def relabelled_seconds(announced, hyp):
    """Seconds the revisions showed under another label than the one announced."""
    seconds = 0.0
    revised = {label: hyp.label_timeline(label).support() for label in hyp.labels()}
    for seg, _, label in announced.itertracks(yield_label=True):
        same = revised[label].crop(seg, mode="intersection").duration() if label in revised else 0.0
        seconds += seg.duration - same
    return seconds


def named_seconds(ref, hyp, name, names=()):
    """Seconds of the named person's reference speech, of everyone else's, of each announced
    with the name, and of theirs announced under a label that is none of names (anonymous)."""
    said = hyp.label_timeline(name).support()
    own = ref.label_timeline(name).support()
    others = Timeline([s for s, _, who in ref.itertracks(yield_label=True) if who != name])
    others = others.support().extrude(own)
    named = lambda t: t.crop(said, mode="intersection").duration()
    announced = own.crop(hyp.get_timeline().support(), mode="intersection").duration()
    anonymous = Timeline([s for s, _, label in hyp.itertracks(yield_label=True)
                          if label not in names]).support()
    return {"own": own.duration(), "own named": named(own), "own announced": announced,
            "others": others.duration(), "others named": named(others),
            "own anonymous": own.crop(anonymous, mode="intersection").duration()}


def delays_of(changes):
    """Announcement delays of the changes announced before the end of the file (at the end the
    rest is finalised at once)."""
    end = max((c["time"] + c["delay"] for c in changes), default=0)
    return [c["delay"] for c in changes if c["time"] + c["delay"] < end - 0.01]


def figures(metrics, parts, extra):
    """One row: the metrics' values from their components (one recording's or the set's
    accumulated ones) and the counts in extra; a metric left out (None) reads NaN."""
    v = {name: m.compute_metric(parts[name]) if m is not None else float("nan")
         for name, m in metrics.items()}
    der, delays = parts["der"], extra["delays"]
    shown = parts.get("der announced") or der
    revision_delays = extra["revision delays"]
    f1 = lambda p, r: 2 * p * r / (p + r) if p + r > 0 else 0.0
    share = lambda a, b: extra[a] / extra[b] if extra["enrolled"] and extra[b] else float("nan")
    return {
        "DER": v["der"], "confusion": der["confusion"] / der["total"],
        "missed": der["missed detection"] / der["total"], "FA": der["false alarm"] / der["total"],
        "seconds": extra["seconds"], "speech seconds": extra["speech"],
        "anchor seconds": extra["own"], "purity": v["purity"], "coverage": v["coverage"],
        "P@0.25": v["p25"], "R@0.25": v["r25"], "F1@0.25": f1(v["p25"], v["r25"]),
        "P@0.5": v["p50"], "R@0.5": v["r50"], "F1@0.5": f1(v["p50"], v["r50"]),
        "delay mean": float(np.mean(delays)) if delays else float("nan"),
        "delay p95": float(np.percentile(delays, 95)) if delays else float("nan"),
        "changes": len(delays), "labels": extra["labels"], "people": extra["people"],
        "anchor recall": share("own named", "own"), "anchor FA": share("others named", "others"),
        # Of the anchor's speech announced as anyone's: what the naming alone loses.
        "anchor named of announced": share("own named", "own announced"),
        # The timeline as announced, before revisions: what a screen showed at the time.
        "DER as announced": v["der announced"],
        "confusion as announced": shown["confusion"] / shown["total"],
        "anchor recall as announced": share("own named as announced", "own"),
        "anchor FA as announced": share("others named as announced", "others"),
        # Of all reference speech: shown under a label that a revision changed later.
        "relabelled": extra["relabelled"] / extra["speech"] if extra["speech"] else float("nan"),
        # Of all reference speech: under an enrolled name that is not the speaker's.
        "wrong name": share("others named", "speech"),
        "wrong name as announced": share("others named as announced", "speech"),
        # Of the enrolled people's speech: under an anonymous label (a voice not yet known).
        "anchor unnamed": share("own anonymous", "own"),
        "anchor unnamed as announced": share("own anonymous as announced", "own"),
        "revisions": len(revision_delays),
        "revision delay p50": float(np.median(revision_delays)) if revision_delays else float("nan"),
        "revision delay p90": (float(np.percentile(revision_delays, 90)) if revision_delays
                               else float("nan")),
    }


def new_metrics():
    return {
        "purity": SegmentationPurity(tolerance=0.5),
        "coverage": SegmentationCoverage(tolerance=0.5),
        "p25": SegmentationPrecision(tolerance=0.25), "r25": SegmentationRecall(tolerance=0.25),
        "p50": SegmentationPrecision(tolerance=0.5), "r50": SegmentationRecall(tolerance=0.5),
        "der": DiarizationErrorRate(collar=0.0, skip_overlap=False),
        "der announced": DiarizationErrorRate(collar=0.0, skip_overlap=False),
    }


def score(metrics, ref, hyp, uem, names, delays=(), announced=None, revision_delays=()):
    """Accumulates one recording into metrics (those set to None are skipped) and returns its
    counts for figures(); names: the enrolled people whose naming is counted; announced: the
    timeline before revisions (None: nothing was revised, it is hyp)."""
    announced = hyp if announced is None else announced
    for name, m in metrics.items():
        if m is None:
            continue
        if name == "der announced":
            m(ref, announced, uem=uem)
        elif name in ("der", "purity", "coverage"):
            m(ref, hyp, uem=uem)
        else:
            m(ref, hyp)
    seconds = uem.duration() if uem is not None else ref.get_timeline().extent().end
    extra = {"seconds": seconds, "delays": list(delays), "labels": len(hyp.labels()),
             "people": len(ref.labels()), "enrolled": len(names), "own": 0.0, "own named": 0.0,
             "own announced": 0.0, "others": 0.0, "others named": 0.0,
             "own named as announced": 0.0, "others named as announced": 0.0,
             "own anonymous": 0.0, "own anonymous as announced": 0.0,
             "speech": ref.get_timeline().support().duration(),
             "relabelled": relabelled_seconds(announced, hyp),
             "revision delays": list(revision_delays)}
    for name in names:
        for k, x in named_seconds(ref, hyp, name, names).items():
            extra[k] += x
        at_the_time = named_seconds(ref, announced, name, names)
        for k in ("own named", "others named", "own anonymous"):
            extra[k + " as announced"] += at_the_time[k]
    return extra


def pooled(metrics, extras):
    """The row of a whole set: its metrics' accumulated components and the summed counts."""
    total = {k: sum((e[k] for e in extras[1:]), extras[0][k]) for k in extras[0]}
    return figures(metrics, {name: m[:] if m is not None else None for name, m in metrics.items()},
                   total)


def evaluate(args, set_name, latency, reidentify, precision="fp32"):
    metrics = new_metrics()
    extras = []
    with tempfile.TemporaryDirectory() as tmp:
        for wav, ref, uem, enrolled in recordings(args, set_name, tmp):
            prints = enrol(args, enrolled, wav.stem, tmp) if reidentify == "on" else None
            hyp, changes, revisions, cmd = run_changes(args, wav, latency, reidentify, precision,
                                                       tmp, prints)
            names = [name for name, _ in enrolled] if prints else []
            extras.append(score(metrics, ref, hyp, uem, names, delays_of(changes),
                                as_announced(changes, hyp), [r["delay"] for r in revisions]))
    row = pooled(metrics, extras)
    row.update({"set": set_name, "latency": latency, "reidentify": reidentify,
                "recordings": len(extras)})
    row["per recording"] = per_recording(metrics, extras)
    return row


def per_recording(metrics, extras):
    """{uri: figures} of each recording, from its own components."""
    return {uri: figures(metrics, {name: m.results_[i][1] if m is not None else None
                                   for name, m in metrics.items()}, extras[i])
            for i, (uri, _) in enumerate(metrics["der"].results_)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["train", "development", "sample"],
                    choices=list(SETS) + list(POOLED) + list(CONCATS) + list(PROGRAMMES))
    ap.add_argument("--latency", nargs="+", default=["1", "2", "5", "offline"])
    ap.add_argument("--reidentify", nargs="+", default=["off"], choices=["off", "on"],
                    help="identity by voice off and/or on (each a row)")
    for opt in IDENTITY_OPTIONS:
        ap.add_argument("--" + opt.replace("_", "-"), dest=opt, type=float)
    ap.add_argument("--max-speakers", dest="max_speakers", type=int)
    ap.add_argument("--step", type=float, default=1.0)
    ap.add_argument("--min-speech", dest="min_speech", type=float)
    ap.add_argument("--min-silence", dest="min_silence", type=float)
    ap.add_argument("--min-gap", dest="min_gap", type=float)
    ap.add_argument("--onset", type=float)
    ap.add_argument("--match-threshold", dest="match_threshold", type=float)
    ap.add_argument("--switch-margin", dest="switch_margin", type=float)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", nargs="+", default=["fp32"],
                    choices=["fp32", "bf16", "fp16-emulated", "bf16-emulated", "tf32-emulated",
                             "fp16-emulated-fp32-sinc", "bf16-emulated-fp32-sinc",
                             "tf32-emulated-fp32-sinc"],
                    help="the CPU engines' precision, each a row: bf16 (AVX512_BF16: the LSTM "
                         "products in bf16, an exploration), or a GPU's tensor-core math emulated "
                         "(every product's operands rounded to fp16, bf16 or tf32, fp32 sums; "
                         "-fp32-sinc: but SincNet's: docs/gpu.md, 'Reduced precision, emulated')")
    ap.add_argument("--model", default=str(ROOT / "models" / "segmentation-3.0.onnx"))
    ap.add_argument("--speakerseg", default=str(ROOT / "build" / "tools" / "speakerseg"))
    ap.add_argument("--programmes", default=str(programmes.OUT),
                    help="where the programmes are (built there with the default seed if missing)")
    ap.add_argument("--per-recording", action="store_true",
                    help="a row per recording under each set's row")
    ap.add_argument("--json", action="store_true", help="one JSON object per row instead of a table")
    args = ap.parse_args()

    cols = ["DER", "confusion", "missed", "FA", "purity", "coverage", "F1@0.25", "F1@0.5",
            "delay mean", "delay p95", "labels", "anchor recall", "anchor FA",
            "anchor named of announced", "confusion as announced", "anchor recall as announced",
            "anchor FA as announced", "relabelled", "revision delay p50", "revision delay p90",
            "wrong name", "wrong name as announced", "anchor unnamed", "anchor unnamed as announced"]
    if not args.json:
        print("# command: .venv/bin/python3 scripts/evaluation/evaluate.py "
              f"{' '.join(sys.argv[1:])}\n")
        print("| set | latency | voice | precision | " + " | ".join(cols) + " | audio |")
        print("|---|---|---|---|" + "---:|" * (len(cols) + 1))
    for set_name in args.sets:
        for latency in args.latency:
            for reidentify in args.reidentify:
                for precision in args.precision:
                    row = evaluate(args, set_name, latency, reidentify, precision)
                    row["precision"] = precision
                    if args.json:
                        print(json.dumps(row), flush=True)
                        continue
                    lat = "offline" if latency == "offline" else f"{float(latency):g} s"
                    rows = [(set_name, row)]
                    if args.per_recording:
                        rows += [(f"{set_name}: {uri}", r)
                                 for uri, r in row["per recording"].items()]
                    for name, r in rows:
                        print(f"| {name} | {lat} | {reidentify} | {precision} | " +
                              " | ".join(cell(r, c) for c in cols) + f" | {r['seconds']:.0f} s |",
                              flush=True)


def cell(row, col):
    if col == "labels":
        return f"{row['labels']} / {row['people']}"
    if np.isnan(row[col]):
        return "—"
    return f"{row[col]:.2f} s" if "delay" in col else f"{row[col]:.3f}"


if __name__ == "__main__":
    main()
