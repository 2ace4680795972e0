#!/usr/bin/env python3
"""Broadcast-like programmes built from the LibriSpeech readings of ../shared/data/librispeech.

Splits the readers by person, seeded, into train (to tune on) and development (to report on):
the 10 readers of a whole chapter (66-104 s each) 6 / 4, three men and three women to train; the
251 readers of one utterance (~14 s) 60 / 40 % within each sex. Nobody is in both. Then builds,
per split, --per-format programmes of each format:

  news    an anchor (enrolled); a field reporter on a remote line who comes back in several
          stories; a second reporter (one utterance cut at its pauses, remote or telephone) who
          comes back; one-off soundbites (studio, remote or telephone). A jingle between stories.
  talk    a host (enrolled) and three regular panellists, all in the studio, in short turns;
          a remote guest in one segment. A jingle between segments.
  callin  two anchors (both enrolled) handing over to each other; callers on the telephone, one
          of whom calls back later. A jingle between segments.

Anchors, hosts, field reporters and panellists are chapter readers (their utterances from a
random one on, in chapter order, wrapping round); everyone else is a one-utterance reader, each
used in one programme of the split only. Each utterance is trimmed to its speech and cut into
phrases at its pauses (energy: 10 ms frames louder than max(5th percentile + 8 dB, loudest -
40 dB); quieter stretches of 0.25 s or more are pauses; runs 20 dB below the loudest frame are
breaths and left out). The speech of a phrase is where its energy above 80 Hz passes the same
rule: some chapter recordings carry 10-30 Hz rumble, which the full-band energy keeps as part of
a phrase, and the reference starts and ends each turn at its speech, not at the rumble around
it (the audio keeps the rumble, as the recording has it). A turn is a run of one person's
phrases in order: the recorded pause is kept where it is at most 0.6 s, else a pause of 0.2-0.6
s is put in. Turns are 0.3-1.0 s apart.
Every phrase is said once in a programme. An enrolled person's enrolment clip is made of whole
utterances of theirs that the programme does not use, 10 s of speech or more.

Channels, per person: speech level -26 dBFS plus a gain of -6..+3 dB; "telephone": 8 kHz
round trip with 300-3400 Hz band-pass and G.711 mu-law; "remote": Opus at 10-16 kbit/s (GStreamer
opusenc/opusdec). The jingle is the Yaru sound theme's desktop-login.oga (Debian package
yaru-theme-sound, CC BY-SA 4.0), at -38 dBFS; a noise floor at -66 dBFS runs under everything.
The RTTM holds one line per turn (labels are LibriSpeech reader ids); jingles and gaps are not in
it.

Writes OUT/SOURCE.txt (licences), OUT/splits.json (each split's readers and their speech, and
what its programmes hold: seconds, reference seconds (turns, the pauses inside included), speech
said, distinct speech, people), and per split OUT/SPLIT/URI.wav (16 kHz mono), URI.rttm, URI.json
(who plays which role, their channel, their utterances, the enrolment clip), enrol/URI-READER.wav
and programmes.json (the list, written last). The same seed gives
byte-identical files on one machine (Opus and the jingle's decoding come from the system's
GStreamer).

Harder variants (issue 37; Variant below), each on its own or all together (--hard), with the
same readers and splits; with none the files are the recipe's, byte for byte:

  --channels    each turn through a channel of its own, drawn per turn: a level (-6..+3 dB), a
                room (exponentially decaying noise as impulse response, RT60 0.2-0.6 s, direct to
                reverberant 0-8 dB), a microphone (high-pass 60-250 Hz, low-pass 3.5-7.5 kHz, a
                peak or dip at 0.8-4 kHz: enrolment_mismatch.py's) and a codec (none, telephone or
                Opus, one in three each)
  --short       every turn 1.5-5 s of speech, whatever the role
  --adjacent    no gap between turns of speech (a change inside speech); jingles keep theirs
  --overlap S   that share of the boundaries between turns overlapped by 0.2-0.8 s (at most half
                of either turn); the RTTM has both speakers there
  --music S     that share of turns with a music bed under them, 12-20 dB below the turn's speech
                level, from 0.5 s before to 0.5 s after it, faded: Frozen-Bubble's music (Debian
                package fb-music-high, GPL-2+); never in the RTTM
  --elsewhere   each enrolment clip cut to its first 10 s and passed through a drawn channel of its
                own (as above): enrolled from another recording
  --hard        all of them, overlap and music at 0.3

Each option draws from a random stream of its own, seeded by the programme, so one alone changes
only what it is about (--short changes the running order, as it must). A variant's manifest
lists its turns: reader, start, end, channel, overlap with the turn before, music bed level.
scripts/evaluation/harder.py builds and scores each.

  .venv/bin/python3 scripts/evaluation/programmes.py [--out build/programmes] [--seed 1]
                                                     [--per-format 3] [--hard | --channels ...]
"""
import argparse
import collections
import csv
import dataclasses
import functools
import json
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np
import soundfile
from pyannote.core import Annotation, Segment
from scipy.io import wavfile
from scipy.signal import butter, resample_poly, sosfiltfilt

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "librispeech"
OUT = ROOT / "build" / "programmes"
RATE = 16000
FRAME = 160                       # energy frames of 10 ms
MARGIN = 3                        # frames kept either side of speech
CUT, JOIN = 0.25, 0.6             # a pause; the longest pause kept as recorded inside a turn
QUIETEST = 20                     # dB below the utterance's loudest frame: quieter runs are breaths
SPEECH_BAND = 80                  # Hz: below it is rumble, not speech, for where a phrase's speech is
PAUSE, GAP, LEAD = (0.2, 0.6), (0.3, 1.0), 0.5
PAD = 0.2                         # silence around a turn while its channel is applied
LEVEL_DB, GAIN_DB, FLOOR_DB, JINGLE_DB = -26.0, (-6.0, 3.0), -66.0, -38.0
ENROL_SECONDS = 10.0
CHAPTER_TRAIN, ONE_TRAIN = 3, 0.6  # chapter readers per sex; share of one-utterance readers
MUSIC = {"package": "yaru-theme-sound", "file": "/usr/share/sounds/Yaru/stereo/desktop-login.oga",
         "licence": "CC-BY-SA-4.0", "copyright": "2018 Mads Rosendahl",
         "source": "https://github.com/ubuntu/yaru (sounds/)"}
# Turn sizes: (shortest target, longest target, end at an utterance's end), in seconds of speech.
OPEN, INTRO, LINK, REPORT = (6, 14, True), (3, 8, True), (2, 6, False), (6, 14, True)
PART, SHORT, WHOLE = (3, 7, False), (1.5, 5, False), (np.inf, np.inf, False)
# Seconds of speech a chapter reader brings (80: all of it but the enrolment clip).
BUDGET = {"anchor": 80, "host": 80, "field reporter": 45, "panellist": 60}
LONGEST = 5.5 * 60                # no turn is added once a programme would be longer
# The harder variants (Variant below).
OVERLAP = (0.2, 0.8)              # seconds two turns overlap at a boundary
BED_DB, BED_EDGE = (12.0, 20.0), 0.5  # a music bed's level below the turn's speech; its fades
ROOM_RT60, ROOM_DRR_DB = (0.2, 0.6), (0.0, 8.0)
HIGH_PASS, LOW_PASS, PEAK_HZ, PEAK = (60, 250), (3500, 7500), (800, 4000), (-0.5, 1.0)
ELSEWHERE_SECONDS = 10.0          # an enrolment from another recording keeps its first 10 s
BEDS = {"package": "fb-music-high", "licence": "GPL-2+",
        "copyright": "Matthias Le Bidan (Frozen-Bubble's music)",
        "files": ["/usr/share/games/frozen-bubble/snd/frozen-mainzik-1p.ogg",
                  "/usr/share/games/frozen-bubble/snd/frozen-mainzik-2p.ogg",
                  "/usr/share/games/frozen-bubble/snd/introzik.ogg"]}


@dataclasses.dataclass(frozen=True)
class Variant:
    """What makes the programmes harder (issue 37), each on its own or together (HARD). All off
    is the recipe above, file for file; each option draws from a random stream of its own, so
    one on alone changes only what it is about (short turns change the running order)."""
    channels: bool = False   # each turn through its own drawn channel: level, band, codec, room
    short: bool = False      # every turn 1.5-5 s of speech (SHORT), whatever the role
    adjacent: bool = False   # no gap between two turns of speech
    overlap: float = 0.0     # share of the boundaries between turns overlapped by 0.2-0.8 s
    music: float = 0.0       # share of turns with a music bed under them
    elsewhere: bool = False  # enrolment clips: first 10 s, through a drawn channel of their own

    def describe(self):
        on = [k if v is True else f"{k} {v:g}" for k, v in dataclasses.asdict(self).items() if v]
        return ", ".join(on) or "none (the easy recipe)"


HARD = Variant(channels=True, short=True, adjacent=True, overlap=0.3, music=0.3, elsewhere=True)


@dataclasses.dataclass
class Reader:
    id: str
    sex: str
    name: str
    utterances: list  # paths under DATA, in chapter order


@dataclasses.dataclass(frozen=True)
class Phrase:
    path: str
    index: int
    start: int  # samples of the utterance: the audio taken
    end: int
    speech_start: int  # where its speech is (start..end less rumble on either side)
    speech_end: int

    @property
    def seconds(self):
        return (self.end - self.start) / RATE


@dataclasses.dataclass
class Person:
    reader: Reader
    role: str
    channel: dict
    queue: collections.deque  # phrases not yet said
    enrolment: list           # utterances of the enrolment clip (none: not enrolled)
    scale: float = 1.0


def readers():
    names = {}
    for line in (DATA / "SPEAKERS.TXT").read_text().splitlines():
        if not line.startswith(";"):
            f = [x.strip() for x in line.split("|")]
            names[f[0]] = f[4]
    by_id = {}
    with open(DATA / "index.tsv") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            r = by_id.setdefault(row["speaker_id"], Reader(row["speaker_id"], row["sex"],
                                                           names[row["speaker_id"]], []))
            r.utterances.append(row["path"])
    return sorted(by_id.values(), key=lambda r: int(r.id))


@functools.lru_cache(maxsize=None)
def audio(path):
    x, rate = soundfile.read(str(DATA / path), dtype="float32")
    assert rate == RATE and x.ndim == 1, path
    return x - x.mean()  # a few recordings carry a DC offset of up to -0.26


def loud_frames(x):
    """Which 10 ms frames of an utterance are louder than max(5th percentile + 8 dB, loudest - 40
    dB), and their levels."""
    n = len(x) // FRAME
    db = 10 * np.log10(np.mean(x[:n * FRAME].reshape(n, FRAME) ** 2, axis=1) + 1e-12)
    return db > max(np.percentile(db, 5) + 8, db.max() - 40), db


@functools.lru_cache(maxsize=None)
def phrases(path):
    """The utterance's speech, cut at its pauses."""
    x = audio(path)
    loud, db = loud_frames(x)
    n = len(db)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], loud, [0]]).astype(int)))
    runs = []
    for s, e in zip(edges[::2], edges[1::2]):
        if runs and (s - runs[-1][1]) * FRAME < CUT * RATE:
            runs[-1][1] = e
        else:
            runs.append([s, e])
    band, _ = loud_frames(sosfiltfilt(butter(4, SPEECH_BAND, btype="highpass", fs=RATE,
                                             output="sos"), x))
    out = []
    for s, e in runs:
        if db[s:e].max() < db.max() - QUIETEST:
            continue
        a, b = max(0, s - MARGIN), min(n, e + MARGIN)
        said = np.flatnonzero(band[s:e]) + s
        # A phrase of rumble only (none seen) keeps its whole length as speech.
        sa, sb = (max(a, said[0] - MARGIN), min(b, said[-1] + 1 + MARGIN)) if len(said) else (a, b)
        out.append(Phrase(path, len(out), a * FRAME, b * FRAME, sa * FRAME, sb * FRAME))
    return out


def speech_seconds(paths):
    return sum(p.seconds for path in paths for p in phrases(path))


def shuffled(items, rng):
    return [items[i] for i in rng.permutation(len(items))]


def split_readers(all_readers, seed):
    """{split: {"chapter": [Reader], "one": [Reader]}}, by person, seeded, within each sex."""
    rng = np.random.default_rng([seed, 0])
    out = {"train": {"chapter": [], "one": []}, "development": {"chapter": [], "one": []}}
    for sex in ("F", "M"):
        for kind in ("chapter", "one"):
            pool = shuffled([r for r in all_readers if r.sex == sex
                             and (len(r.utterances) > 1) == (kind == "chapter")], rng)
            k = CHAPTER_TRAIN if kind == "chapter" else round(ONE_TRAIN * len(pool))
            out["train"][kind] += pool[:k]
            out["development"][kind] += pool[k:]
    return out


def channel(kind, rng):
    c = {"kind": kind, "gain_db": round(float(rng.uniform(*GAIN_DB)), 1)}
    if kind == "remote":
        c["codec"], c["bitrate"] = "opus", int(rng.choice([10000, 12000, 16000]))
    return c


def cast(reader, role, kind, rng, enrolled=False):
    """A person with their material: a chapter reader's random run of utterances (up to the
    role's budget, the enrolment clip's utterances left out), or a one-utterance reader's one."""
    paths = list(reader.utterances)
    enrolment = []
    if len(paths) > 1:
        k = int(rng.integers(len(paths)))
        paths = paths[k:] + paths[:k]
        while enrolled and speech_seconds(enrolment) < ENROL_SECONDS:
            enrolment.insert(0, paths.pop())
        used = []
        for p in paths:
            if used and speech_seconds(used + [p]) > BUDGET[role]:
                break
            used.append(p)
        paths = used
    queue = collections.deque(ph for p in paths for ph in phrases(p))
    person = Person(reader, role, channel(kind, rng), queue, enrolment)
    speech = np.concatenate([audio(p.path)[p.start:p.end] for p in queue])
    level = 10 * np.log10(np.mean(speech ** 2))
    person.scale = 10 ** ((LEVEL_DB + person.channel["gain_db"] - level) / 20)
    return person


def returning(one):
    """The next one-utterance reader with speech and pauses enough to come back: 10 s of speech
    in three phrases or more."""
    i = next(i for i in range(len(one) - 1, -1, -1)
             if len(phrases(one[i].utterances[0])) >= 3 and speech_seconds(one[i].utterances) >= 10)
    return one.pop(i)


class Script:
    """A running order: turns (person, phrases) and jingles, and roughly how long it runs."""

    def __init__(self, rng, variant):
        self.rng, self.variant, self.events, self.seconds = rng, variant, [], 0.0
        self.seed = None  # the programme's, for the variant's draws (set by build_split)

    def draws(self, what):
        """The random stream of one of the variant's options."""
        names = [f.name for f in dataclasses.fields(Variant)]
        return np.random.default_rng([*self.seed, 4 + names.index(what)])

    def jingle(self):
        if self.events and self.events[-1] is None:
            return
        self.events.append(None)
        self.seconds += 4.0 + np.mean(GAP)

    def said(self):
        return [p for e in self.events if e for p in e[1]]

    def people(self):
        """Everyone who speaks, in order of their first turn."""
        return list({id(e[0]): e[0] for e in self.events if e}.values())

    def say(self, person, size):
        """One turn of the person's next phrases (nothing if they have none left, spoke last, or
        the programme is long enough): up to a target drawn from the size's range, and on to
        the end of the utterance if the size says so, without passing its longest."""
        lo, hi, whole = SHORT if self.variant.short else size
        last = self.events[-1] if self.events else None
        if not person.queue or (last and last[0] is person) or self.seconds > LONGEST:
            return False
        target = self.rng.uniform(lo, hi) if np.isfinite(hi) else np.inf
        taken, t = [], 0.0
        while person.queue:
            p = person.queue[0]
            if taken and t + p.seconds > hi:
                break
            taken.append(person.queue.popleft())
            t += p.seconds
            if t >= target and not (whole and person.queue and person.queue[0].path == p.path):
                break
        self.events.append((person, taken))
        self.seconds += t + np.mean(GAP)
        return True


def news(rng, chapter, one, variant):
    anchor = cast(chapter[0], "anchor", "studio", rng, enrolled=True)
    field = cast(chapter[1], "field reporter", "remote", rng)
    reporter = cast(returning(one), "reporter", str(rng.choice(["remote", "telephone"])), rng)
    bites = [cast(one.pop(), "soundbite", str(rng.choice(["studio", "remote", "telephone"])), rng)
             for _ in range(14)]
    stories = {
        "field report": [(anchor, INTRO), (field, REPORT), ("bite", WHOLE), (field, REPORT),
                         ("bite", WHOLE)],
        "reporter": [(anchor, INTRO), (reporter, PART), ("bite", WHOLE), (reporter, PART),
                     (anchor, LINK)],
        "soundbites": [(anchor, INTRO), ("bite", WHOLE), ("bite", WHOLE), (anchor, LINK),
                       ("bite", WHOLE)],
    }
    order = ["field report", "soundbites", "reporter", "field report", "soundbites", "reporter",
             "field report", "soundbites"]
    order = [order[0]] + [order[i] for i in 1 + rng.permutation(len(order) - 1)]
    s = Script(rng, variant)
    s.jingle()
    for story in order:
        if not anchor.queue:
            break
        for who, size in stories[story]:
            if who == "bite":
                if bites:
                    s.say(bites.pop(), size)
            else:
                s.say(who, size)
        s.jingle()
    s.say(anchor, INTRO)
    s.jingle()
    return s


def talk(rng, chapter, one, variant):
    host = cast(chapter[0], "host", "studio", rng, enrolled=True)
    panel = [cast(r, "panellist", "studio", rng) for r in chapter[1:4]]
    guest = cast(returning(one), "remote guest", "remote", rng)
    s = Script(rng, variant)
    s.jingle()
    guest_segment = int(rng.integers(3))
    for segment in range(3):
        s.say(host, INTRO if segment else OPEN)
        last = host
        for turn in range(14):
            if segment == guest_segment and turn % 3 == 1 and guest.queue:
                who = guest
            elif last is not host and rng.random() < 0.3:
                who = host
            else:
                who = panel[int(rng.choice([i for i, p in enumerate(panel) if p is not last]))]
            s.say(who, SHORT if who is not guest else PART)
            last = who
        s.jingle()
    s.say(host, INTRO)
    s.jingle()
    return s


def call(s, anchor, caller, sizes):
    """The anchor takes a call: a word from the anchor before each of the caller's turns."""
    for size in sizes:
        s.say(anchor, LINK)
        s.say(caller, size)


def callin(rng, chapter, one, variant):
    anchors = [cast(r, "anchor", "studio", rng, enrolled=True) for r in chapter[:2]]
    back = cast(returning(one), "caller", "telephone", rng)  # in the first segment and the last
    callers = [back] + [cast(one.pop(), "caller", "telephone", rng) for _ in range(8)]
    s = Script(rng, variant)
    s.jingle()
    s.say(anchors[0], OPEN)
    s.say(anchors[1], OPEN)
    for segment in range(3):
        duty, other = anchors[segment % 2], anchors[1 - segment % 2]
        for caller in callers[3 * segment:3 * segment + 3]:
            call(s, duty, caller, [PART] if caller is back else [PART, WHOLE])
        if segment == 2:
            call(s, duty, back, [PART, WHOLE])
        s.say(duty, LINK)
        s.say(other, INTRO)
        s.jingle()
    return s


FORMATS = {"news": news, "talk": talk, "callin": callin}


def telephone(x):
    """8 kHz round trip: 300-3400 Hz band-pass (zero phase) and G.711 mu-law on 8 bits."""
    y = resample_poly(x, 1, 2)
    y = sosfiltfilt(butter(4, [300, 3400], btype="bandpass", fs=RATE // 2, output="sos"), y)
    mu = 255.0
    q = np.round(np.sign(y) * np.log1p(mu * np.minimum(np.abs(y), 1)) / np.log1p(mu) * 127) / 127
    y = np.sign(q) * np.expm1(np.abs(q) * np.log1p(mu)) / mu
    return resample_poly(y, 2, 1)[:len(x)].astype(np.float32)


def gst_decode(path, tmp, chain=()):
    """The file decoded by GStreamer, through the chain of elements, as 16 kHz mono float."""
    raw = pathlib.Path(tmp) / "decoded.f32"
    subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={path}", "!", "decodebin", "!",
                    *chain, "audioconvert", "!", "audioresample", "!",
                    f"audio/x-raw,format=F32LE,rate={RATE},channels=1", "!", "filesink",
                    f"location={raw}"], check=True)
    return np.fromfile(raw, dtype=np.float32)


def opus(x, bitrate, tmp):
    """An Opus round trip (GStreamer's decoder drops the encoder's delay: same length, no lag)."""
    wav = pathlib.Path(tmp) / "turn.wav"
    wavfile.write(str(wav), RATE, x.astype(np.float32))
    y = gst_decode(wav, tmp, ["audioconvert", "!", "opusenc", f"bitrate={bitrate}", "!",
                              "opusdec", "!"])
    assert len(y) == len(x), (len(x), len(y))
    return y


def drawn_channel(rng):
    """A channel of its own (Variant.channels, .elsewhere): a level, a room (exponentially
    decaying noise, RT60 0.2-0.6 s, direct-to-reverberant 0-8 dB), a microphone's band and peak
    (high-pass 60-250 Hz, low-pass 3.5-7.5 kHz, a peak or dip at 0.8-4 kHz: -6..+4 dB) and a
    codec: none, telephone or Opus, one in three each."""
    u = lambda lo_hi: round(float(rng.uniform(*lo_hi)), 2)
    c = channel(str(rng.choice(["studio", "telephone", "remote"])), rng)
    c.update({"rt60": u(ROOM_RT60), "drr_db": u(ROOM_DRR_DB), "high_pass": u(HIGH_PASS),
              "low_pass": u(LOW_PASS), "peak_hz": u(PEAK_HZ), "peak": u(PEAK),
              "room_seed": int(rng.integers(2 ** 31))})
    return c


def through(x, c, tmp):
    """x through the channel c: its room and microphone if it has them, then its codec."""
    if "rt60" in c:
        import enrolment_mismatch as em  # it imports this module
        x = em.room(x, np.random.default_rng(c["room_seed"]), c["rt60"], c["drr_db"])
        x = em.microphone(x, c["high_pass"], c["low_pass"], c["peak_hz"], c["peak"])
    if c["kind"] == "telephone":
        return telephone(x)
    if c["kind"] == "remote":
        return opus(x, c["bitrate"], tmp)
    return x


def on_channel(person, x, tmp, c=None):
    """A turn of the person through their channel, or through c at its own level."""
    c = c or person.channel
    return through(x * person.scale * 10 ** ((c["gain_db"] - person.channel["gain_db"]) / 20),
                   c, tmp)


def faded(x):
    n = min(len(x) // 2, RATE // 100)
    ramp = (0.5 - 0.5 * np.cos(np.linspace(0, np.pi, n))).astype(np.float32)
    x = x.copy()
    x[:n] *= ramp
    x[len(x) - n:] *= ramp[::-1]
    return x


def spans(taken):
    """(path, start, end) stretches of one recording each: phrases that follow each other in an
    utterance with a pause of at most JOIN between them are one stretch."""
    out = []
    for p in taken:
        last = out[-1] if out else None
        if (last and last[0] == p.path and last[3] == p.index - 1
                and p.start - last[2] <= JOIN * RATE):
            out[-1] = (p.path, last[1], p.end, p.index)
        else:
            out.append((p.path, p.start, p.end, p.index))
    return [s[:3] for s in out]


def turn_audio(taken, rng):
    parts = []
    for i, (path, a, b) in enumerate(spans(taken)):
        if i:
            parts.append(np.zeros(round(rng.uniform(*PAUSE) * RATE), dtype=np.float32))
        parts.append(faded(audio(path)[a:b]))
    return np.concatenate(parts)


@functools.lru_cache(maxsize=None)
def jingle(tmp):
    if not pathlib.Path(MUSIC["file"]).exists():
        raise SystemExit(f"programmes: {MUSIC['file']} is missing: "
                         f"apt-get install {MUSIC['package']}")
    x = gst_decode(MUSIC["file"], tmp)
    return x * 10 ** (JINGLE_DB / 20) / np.sqrt(np.mean(x ** 2))


@functools.lru_cache(maxsize=None)
def bed_track(path, tmp):
    if not pathlib.Path(path).exists():
        raise SystemExit(f"programmes: {path} is missing: apt-get install {BEDS['package']}")
    x = gst_decode(path, tmp)
    loud, _ = loud_frames(x)
    n = len(loud) * FRAME
    rms = np.sqrt(np.mean(x[:n].reshape(-1, FRAME)[loud] ** 2))
    return x / rms  # its loud frames at 0 dB


def music_bed(seconds, level_db, rng, tmp):
    """seconds of a music track from a random place, faded in and out, at level_db (RMS)."""
    x = bed_track(str(rng.choice(BEDS["files"])), tmp)
    n = round(seconds * RATE)
    start = int(rng.integers(max(1, len(x) - n)))
    y = np.resize(x[start:start + n], n)  # a track shorter than the bed repeats
    edge = np.minimum(1.0, np.minimum(np.arange(n), np.arange(n)[::-1]) / (BED_EDGE * RATE))
    return (y * edge * 10 ** (level_db / 20)).astype(np.float32)


def render(uri, script, tmp):
    """The programme's samples, its reference, where the jingles are, and its turns."""
    rng, pad, at = script.rng, round(PAD * RATE), round(LEAD * RATE)
    v = script.variant
    if v.channels:
        pad += round(max(ROOM_RT60) * RATE)  # the room's tail
    channels, overlaps, beds = (script.draws(k) for k in ("channels", "overlap", "music"))
    placed, ref, jingles, turns, last = [], Annotation(uri=uri), [], [], None
    for i, event in enumerate(script.events):
        gap = round(rng.uniform(*GAP) * RATE) if i else 0
        if event is None:
            at += gap
            x = jingle(tmp)
            placed.append((at, x))
            jingles.append([round(at / RATE, 3), round((at + len(x)) / RATE, 3)])
        else:
            person, taken = event
            x = turn_audio(taken, rng)
            if last is not None and script.events[i - 1] is not None:
                gap = 0 if v.adjacent else gap
                if v.overlap and overlaps.random() < v.overlap:
                    gap = -round(min(overlaps.uniform(*OVERLAP), len(x) / RATE / 2,
                                     len(last) / RATE / 2) * RATE)
            at += gap
            turn = {"reader": person.reader.id, "overlap": round(max(0, -gap) / RATE, 3)}
            c = drawn_channel(channels) if v.channels else None
            y = on_channel(person, np.pad(x, pad), tmp, c)
            placed.append((at - pad, y))
            head = taken[0].speech_start - taken[0].start
            tail = taken[-1].end - taken[-1].speech_end
            ref[Segment((at + head) / RATE, (at + len(x) - tail) / RATE)] = person.reader.id
            if v.music and beds.random() < v.music:
                level = LEVEL_DB + (c or person.channel)["gain_db"] - beds.uniform(*BED_DB)
                bed = music_bed(len(x) / RATE + 2 * BED_EDGE, level, beds, tmp)
                placed.append((max(0, at - round(BED_EDGE * RATE)), bed))
                turn["music bed dB"] = round(float(level), 1)
            turn.update({"start": round((at + head) / RATE, 3),
                         "end": round((at + len(x) - tail) / RATE, 3), "channel": c})
            turns.append(turn)
            last = x
        at += len(x)
    y = np.zeros(at + round(LEAD * RATE), dtype=np.float64)
    for start, x in placed:
        y[start:start + len(x)] += x
    y += rng.standard_normal(len(y)) * 10 ** (FLOOR_DB / 20)
    peak = np.abs(y).max()
    return y * min(1.0, 0.98 / peak), ref, jingles, turns


def write_wav(path, x):
    wavfile.write(str(path), RATE, np.round(np.clip(x, -1, 1) * 32767).astype(np.int16))


def enrolment_clip(person, path, elsewhere=None, tmp=None):
    """The clip of the person's enrolment utterances; elsewhere (a random stream): its first
    10 s through a drawn channel, at the clip's peak (as enrolment_mismatch.py keeps it)."""
    parts = []
    for p in person.enrolment:
        ph = phrases(p)
        parts += [audio(p)[ph[0].start:ph[-1].end], np.zeros(round(0.3 * RATE), dtype=np.float32)]
    x, out = np.concatenate(parts), {}
    if elsewhere is not None:
        x = x[:round(ELSEWHERE_SECONDS * RATE)]
        out["channel"] = drawn_channel(elsewhere)
        y = through(x, out["channel"], tmp)
        x = y * np.abs(x).max() / max(np.abs(y).max(), 1e-9)
    write_wav(path, x)
    return {"wav": f"enrol/{path.name}", "utterances": person.enrolment,
            "speech seconds": round(speech_seconds(person.enrolment), 2), **out}


def describe(person, script, folder, uri, elsewhere, tmp):
    turns = [e[1] for e in script.events if e and e[0] is person]
    said = [p for taken in turns for p in taken]
    out = {"reader": person.reader.id, "name": person.reader.name, "sex": person.reader.sex,
           "role": person.role,
           "channel": "each turn its own" if script.variant.channels else person.channel,
           "turns": len(turns),
           "speech seconds": round(sum(p.seconds for p in said), 2),
           "utterances": sorted({p.path for p in said}), "enrolment": None}
    if person.enrolment:
        clip = folder / "enrol" / f"{uri}-{person.reader.id}.wav"
        out["enrolment"] = enrolment_clip(person, clip, elsewhere, tmp)
    return out


def build_programme(folder, uri, fmt, script, tmp):
    y, ref, jingles, turns = render(uri, script, tmp)
    elsewhere = script.draws("elsewhere") if script.variant.elsewhere else None
    write_wav(folder / f"{uri}.wav", y)
    with open(folder / f"{uri}.rttm", "w") as f:
        ref.write_rttm(f)
    manifest = {"uri": uri, "format": fmt, "wav": f"{uri}.wav", "rttm": f"{uri}.rttm",
                "seconds": round(len(y) / RATE, 3),
                "reference seconds": round(ref.get_timeline().duration(), 3),
                "speech seconds": round(sum(p.seconds for p in script.said()), 3),
                "people": [describe(p, script, folder, uri, elsewhere, tmp)
                           for p in script.people()],
                "jingles": jingles, "music": MUSIC["file"]}
    if script.variant != Variant():
        manifest.update({"variant": dataclasses.asdict(script.variant), "turns": turns})
    (folder / f"{uri}.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def build_split(folder, k, readers_of, seed, per_format, variant):
    """The split's programmes (one-utterance readers drawn in a seeded order, each once; the
    chapter readers in a seeded order per format, turned by one for each programme, so that
    each programme of a format has another anchor or host), and how much they hold."""
    (folder / "enrol").mkdir(parents=True, exist_ok=True)
    one = shuffled(readers_of["one"], np.random.default_rng([seed, 1, k]))
    chapter, uris, manifests, said = readers_of["chapter"], [], [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for f, (fmt, make) in enumerate(FORMATS.items()):
            order = np.random.default_rng([seed, 2, k, f]).permutation(len(chapter))
            for i in range(per_format):
                turned = [chapter[order[(i + j) % len(chapter)]] for j in range(len(chapter))]
                script = make(np.random.default_rng([seed, 3, k, f, i]), turned, one, variant)
                script.seed = [seed, k, f, i]
                uris.append(f"{folder.name}-{fmt}-{i + 1}")
                manifests.append(build_programme(folder, uris[-1], fmt, script, tmp))
                said |= set(script.said())
    (folder / "programmes.json").write_text(json.dumps(uris, indent=1) + "\n")
    total = lambda key: round(sum(m[key] for m in manifests), 1)
    return {"count": len(uris), "seconds": total("seconds"),
            "reference seconds": total("reference seconds"),
            "speech seconds": total("speech seconds"),
            "distinct speech seconds": round(sum(p.seconds for p in said), 1),
            "people": len({p["reader"] for m in manifests for p in m["people"]})}


SOURCE = """Programmes built by scripts/evaluation/programmes.py (seed {seed}) from:

Speech: LibriSpeech (c) 2014 by Vassil Panayotov, CC BY 4.0 (LICENSE_LibriSpeech.TXT), as copied
into ../shared/data/librispeech from Resemblyzer's repository (see its SOURCE.txt). The
recordings are public-domain LibriVox readings; each programme's JSON names its readers (their
LibriVox names from SPEAKERS.TXT). The audio was trimmed, cut at pauses, rearranged, leveled and
passed through telephone and Opus channels.

Jingle: {file} from the Debian package {package}, licence {licence}, (c) {copyright},
{source}.

The programme WAVs mix both, so they are shared under CC BY-SA 4.0 with the attributions above;
the enrolment clips hold LibriSpeech speech only (CC BY 4.0).
"""

SOURCE_BEDS = """
Harder variant: {variant}. Music beds: {files} from the Debian package {package}, licence
{licence} (GPL-2, beside this file), (c) {copyright}. Where a programme has a bed, its WAV mixes
CC BY 4.0, CC BY-SA 4.0 and GPL-2+ material: share it under the terms of each, with the
attributions above.
"""


def build(out=OUT, seed=1, per_format=3, variant=Variant()):
    if shutil.which("gst-launch-1.0") is None:
        raise SystemExit("programmes: gst-launch-1.0 not found (gstreamer1.0-tools, -plugins-base)")
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pool = split_readers(readers(), seed)
    splits = {name: {kind: {"readers": [r.id for r in rs], "speech seconds":
                            round(sum(speech_seconds(r.utterances) for r in rs), 1)}
                     for kind, rs in p.items()} for name, p in pool.items()}
    for k, name in enumerate(pool):
        splits[name]["programmes"] = build_split(out / name, k, pool[name], seed, per_format,
                                                 variant)
    source = SOURCE.format(seed=seed, **MUSIC)
    if variant != Variant():
        splits["variant"] = dataclasses.asdict(variant)
        source += SOURCE_BEDS.format(variant=variant.describe(), **{**BEDS, "files": ", ".join(
            BEDS["files"])}) if variant.music else f"\nHarder variant: {variant.describe()}.\n"
        if variant.music:
            shutil.copyfile("/usr/share/common-licenses/GPL-2", out / "GPL-2")
    (out / "SOURCE.txt").write_text(source)
    shutil.copyfile(DATA / "LICENSE_LibriSpeech.TXT", out / "LICENSE_LibriSpeech.TXT")
    (out / "splits.json").write_text(json.dumps({"seed": seed, **splits}, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-format", type=int, default=3)
    hard = ap.add_argument_group("harder variants (issue 37; each alone, or --hard for all)")
    hard.add_argument("--channels", action="store_true",
                      help="each turn through its own drawn channel: level, room, band, codec")
    hard.add_argument("--short", action="store_true", help="every turn 1.5-5 s of speech")
    hard.add_argument("--adjacent", action="store_true", help="no gap between turns of speech")
    hard.add_argument("--overlap", type=float, default=0.0, metavar="SHARE",
                      help="that share of the boundaries between turns overlapped 0.2-0.8 s")
    hard.add_argument("--music", type=float, default=0.0, metavar="SHARE",
                      help="that share of turns with a music bed 12-20 dB under the speech")
    hard.add_argument("--elsewhere", action="store_true",
                      help="enrolment clips: first 10 s, through a drawn channel of their own")
    hard.add_argument("--hard", action="store_true", help=f"all of them: {HARD.describe()}")
    args = ap.parse_args()
    variant = HARD if args.hard else Variant(args.channels, args.short, args.adjacent,
                                             args.overlap, args.music, args.elsewhere)
    build(args.out, args.seed, args.per_format, variant)


if __name__ == "__main__":
    main()
