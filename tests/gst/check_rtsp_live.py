#!/usr/bin/python3
"""pipelines/live-stream.py against a real RTSP server on loopback (rtsp_feed_server.py, in a
process of its own: gst-rtsp-server feeding sample.wav live at real time as Opus over RTP), the
element following it through rtspsrc (--rtsp-latency, 200 ms by default). The three ways a feed
fails in the field:

  lost    after the recording the server feeds nothing more and sends no end: the element must
          announce the last turn change, which waited for `latency` of newer audio that never
          came, then the stall. Changes are announced while the recording is fed, each near an
          annotated turn and no earlier than its `delay` after its speech was fed (prints each
          change's delay and lag: from its speech going into the server to its line on stdout).
  killed  the server is killed (SIGKILL) 14 s into the recording and another starts on the same
          port 3 s later, feeding the recording from 17 s (what a restarted encoder sends: the
          present): the recipe announces the loss as a stall, connects again with backoff and
          finds the turns of the rest of the recording, on the same time line.
  frozen  the server is stopped (SIGSTOP) 14 s into the recording for 13 s, then resumed: a
          stall during the freeze, then the audio it owed (sent at once); every change in order
          on its time line, a new line only with its reason, no burst of changes from nobody.

Usage: check_rtsp_live.py MODE ROOT RECORDING RTTM MODEL"""
import json
import os
import pathlib
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import wave

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "common"))
import gst_plugins  # noqa: E402

# The server's (appsrc, Opus, RTP payloader, the RTSP server's UDP and RTP sessions) and the
# client's (rtspsrc ! decodebin, the RTP depayloader, Opus, fakesink) plugins, and nothing else.
gst_plugins.use_only("coreelements", "app", "audioconvert", "audioresample", "opus", "rtp",
                     "rtpmanager", "udp", "rtsp", "playback", "typefindfunctions")

mode, root, recording, rttm, model = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
if mode not in ("lost", "killed", "frozen"):
    sys.exit(f"FAIL: unknown mode {mode!r}")
if not os.path.exists(recording):
    if os.environ.get("CI") == "true":
        sys.exit(f"FAIL: {recording} is required on CI")
    print(f"SKIP: {recording} is missing (../shared/data)")
    sys.exit(77)
try:
    import gi

    gi.require_version("GstRtspServer", "1.0")
except (ImportError, ValueError) as e:
    sys.exit(f"FAIL: {e}: the RTSP server's introspection data is missing (scripts/setup.sh installs "
             "gir1.2-gst-rtsp-server-1.0)")

RTSP_LATENCY = int(os.environ.get("RTSP_LATENCY", "200")) / 1000  # set it to compare lags
LATENCY, STALL_MARGIN = 2.0, 1.0  # the element's defaults
STALL_AFTER = RTSP_LATENCY + LATENCY + STALL_MARGIN
FAIL_AT, DOWN, FROZEN = 14.0, 3.0, 13.0  # seconds into the recording; the outage; the freeze
with wave.open(recording) as w:
    duration = w.getnframes() / w.getframerate()
boundaries = []
for line in pathlib.Path(rttm).read_text().splitlines():
    f = line.split()
    if f and f[0] == "SPEAKER":
        boundaries += [float(f[3]), float(f[3]) + float(f[4])]


def reader(stream, into):
    """Each line of `stream` with the time.monotonic() of its arrival, then None."""
    def run():
        for line in stream:
            into.put((time.monotonic(), line))
        into.put((time.monotonic(), None))
    threading.Thread(target=run, daemon=True).start()


class Server:
    """rtsp_feed_server.py: its url, and the monotonic time its recording's first fed sample
    (at --from) went in."""

    def __init__(self, port=0, start_at=0.0):
        self.proc = subprocess.Popen(
            [sys.executable, str(pathlib.Path(__file__).resolve().parent / "rtsp_feed_server.py"),
             recording, "--port", str(port), "--from", str(start_at)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines, self.start_at, self.fed = queue.Queue(), start_at, {}
        reader(self.proc.stdout, self.lines)
        self.url = self.wait("url", 30)

    def wait(self, word, timeout):
        deadline = time.monotonic() + timeout
        while word not in self.fed:
            try:
                _, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.proc.kill()
                sys.exit(f"FAIL: the RTSP server did not say '{word}': {self.proc.stderr.read()}")
            key, _, value = line.strip().partition(" ")
            self.fed[key] = value if key == "url" else float(value)
        return self.fed[word]

    def stop(self):
        self.proc.kill()
        self.proc.wait()


server = Server()
port = int(server.url.rsplit(":", 1)[1].split("/")[0])
# The plugin: SPEAKERCHANGE_PLUGIN_DIR (meson's build tree), which live-stream.py honours.
client = subprocess.Popen([sys.executable, str(root / "pipelines" / "live-stream.py"), server.url,
                           "--rtsp-latency", str(int(RTSP_LATENCY * 1000)), f"model={model}", "threads=1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
out, err = queue.Queue(), queue.Queue()
reader(client.stdout, out)
reader(client.stderr, err)
start = server.wait("start", 60)  # monotonic time of the recording's 0 s going in
servers = [server]

# What happens to the server, on a schedule in the recording's time.
if mode == "killed":
    time.sleep(max(0.0, start + FAIL_AT - time.monotonic()))
    server.stop()
    killed_at = time.monotonic()
    time.sleep(DOWN)
    servers.append(Server(port, FAIL_AT + DOWN))
elif mode == "frozen":
    time.sleep(max(0.0, start + FAIL_AT - time.monotonic()))
    os.kill(server.proc.pid, signal.SIGSTOP)
    time.sleep(FROZEN)
    os.kill(server.proc.pid, signal.SIGCONT)
stalls_wanted = 1 if mode == "lost" else 2

changes = []
deadline = time.monotonic() + duration + 90  # a guard against a hang, not a measure of speed
while time.monotonic() < deadline and sum(c.get("stalled", False) for c in changes) < stalls_wanted:
    try:
        at, line = out.get(timeout=1)
    except queue.Empty:
        continue
    if line is None:
        break
    c = json.loads(line)
    if "revises" in c:
        continue
    c["at"] = at
    if "lag" in c:
        c["lag_client"] = c.pop("lag")
    changes.append(c)
client.send_signal(signal.SIGINT)
try:
    client.wait(timeout=20)
except subprocess.TimeoutExpired:
    client.kill()
for s in servers:
    s.stop()
notes = []
while True:
    _, line = err.get()
    if line is None:
        break
    notes.append(line.rstrip())

failures = []
stalls = [c for c in changes if c.get("stalled")]
if len(stalls) != stalls_wanted:
    sys.exit(f"FAIL: {len(stalls)} stalls announced, want {stalls_wanted}: {changes}\n"
             "live-stream.py's stderr:\n" + "\n".join(notes))

# Where each change lies in the recording: the last stall's time is the end of the recording; in
# `killed`, the changes before the first stall are placed from it (where the feed was killed).
# In `frozen` the changes before the freeze are placed from its stall (the freeze's place); after
# it, the audio owed came stamped as it arrived, and they have no place.
end_ts = stalls[-1]["time"]
first_part = changes[:changes.index(stalls[0]) + 1] if mode != "lost" else []
failed_pos = (killed_at if mode == "killed" else start + FAIL_AT) - start
for c in changes:
    if c in first_part:
        c["position"] = failed_pos - (stalls[0]["time"] - c["time"])
    elif mode != "frozen":
        c["position"] = duration - (end_ts - c["time"])
print(f"{mode}: {server.url}, {duration:.2f} s recording, {len(changes) - len(stalls)} changes, {len(stalls)} stalls")
print("   position      time   delay     lag   line")
for c in changes:
    where = f"{c['position']:9.3f}" if "position" in c else f"{'-':>9}"
    print(f"  {where} {c['time']:9.3f} {c['delay']:7.3f} {c.get('lag_client', float('nan')):7.3f} "
          f"{c.get('timeline', 0):6d}   "
          f"{c['previous'] or 'nobody'} -> {c['speaker'] or 'nobody'}"
          f"{' (stalled)' if c.get('stalled') else ''}"
          f"{'   new time line: ' + c['new-timeline'] if c.get('new-timeline') else ''}")
for n in notes:
    print("  stderr:", n)


def near_turn(c, slack=0.75):
    """0.75 s rather than the 0.5 s of the file tests: Opus and the live window phase move a turn
    a little (9.43 s for the annotated 9.92 s once)."""
    return min(abs(b - c["position"]) for b in boundaries) <= slack


# What every mode holds: on each time line no change is earlier than the one before it, and a
# new line says why it began.
line, last = 0, None
for c in changes:
    if c.get("timeline", 0) != line:
        if c.get("timeline", 0) < line or not c.get("new-timeline"):
            failures.append(f"time line {line} -> {c.get('timeline', 0)} without a reason: {c}")
        line, last = c.get("timeline", 0), None
    if last is not None and c["time"] < last["time"]:
        failures.append(f"{c['time']:.3f} s announced after {last['time']:.3f} s on time line {line}")
    last = c

turns = [c for c in changes if not c.get("stalled")]
between = [c for c in turns if c["speaker"] and c["previous"]]
if mode == "lost":
    fed_end = start + duration  # the recording's last audio went into the server
    for c in changes:
        c["lag"] = c["at"] - (start + c["position"])
    # sample.wav has 7 turn changes; Opus and the window phase the feed's start gives may hide
    # the 0.9 s turn at 10 s.
    if len(turns) < 4:
        failures.append(f"{len(turns)} changes, want at least 4")
    for c in turns:
        if c["speaker"] and c["previous"] and not near_turn(c):
            failures.append(f"change at {c['position']:.3f} s is not near an annotated turn")
        # Causality, and so a check of the measurement: the audio that made the change final was
        # fed `delay` after it, then crossed the network and the jitter buffer. A little slack for
        # Opus's frames.
        if c["lag"] < c["delay"] - 0.05:
            failures.append(f"announced {c['lag']:.3f} s after its speech, before its delay {c['delay']:.3f} s")
        # The recipe's own lag, from the audio's running time in the client: the same less the
        # network and the jitter buffer.
        if not c["delay"] - 0.01 <= c.get("lag_client", c["lag"]) <= c["lag"] + 0.05:
            failures.append(f"live-stream.py's lag {c.get('lag_client')} s is not between the delay "
                            f"{c['delay']:.3f} s and the lag measured here, {c['lag']:.3f} s")
    live = [c for c in turns if c["at"] < fed_end]
    if len(live) < 3:
        failures.append(f"only {len(live)} changes announced while the recording was being fed")
    stall = stalls[0]
    if turns:
        last_turn = turns[-1]
        # The last turn change (28.48 s in sample.wav) was 1.5 s from the end: only the stall made
        # it final.
        if not (last_turn["at"] > fed_end and last_turn["delay"] < LATENCY):
            failures.append(f"the last change {last_turn} was not made final by the stall")
        if stall["speaker"] != "" or stall["previous"] != last_turn["speaker"]:
            failures.append(f"the stall {stall} does not end {last_turn['speaker']}'s turn")
    # Once the clock ran upstream's latency (the jitter buffer's and a little more) + latency +
    # stall-margin past the last audio.
    if stall["delay"] < STALL_AFTER - 0.01:
        failures.append(f"the stall {stall} was announced too early")
    if live:
        print(f"delay {min(c['delay'] for c in live):.2f}-{max(c['delay'] for c in live):.2f} s, "
              f"lag {min(c['lag'] for c in live):.2f}-{max(c['lag'] for c in live):.2f} s while fed "
              f"(rtspsrc latency {RTSP_LATENCY * 1000:.0f} ms); the stall came "
              f"{stall['at'] - fed_end:.2f} s after the feed stopped")
elif mode == "killed":
    before = [c for c in turns if c in first_part]
    after = [c for c in between if c not in first_part]
    # The first speech (6.69 s) and a turn before the kill (7.55, 8.32, 9.92, 10.57 s): announced
    # before the loss was.
    if len(before) < 2:
        failures.append(f"{len(before)} changes before the server was killed, want at least 2")
    # The loss, as a stall: the clock ran the jitter buffer + latency + stall-margin past the last
    # audio, which reached the element at most when the server died.
    if not stalls[0]["at"] - killed_at >= STALL_AFTER - RTSP_LATENCY - 0.05:
        failures.append(f"the loss was announced {stalls[0]['at'] - killed_at:.2f} s after the kill")
    # After the restart (from 17 s): turns at 18.05, 21.78 and 28.48 s.
    found = [c for c in after if near_turn(c)]
    if len(found) < 2:
        failures.append(f"{len(found)} of the changes after the restart near an annotated turn, want 2")
    for c in after:
        if not near_turn(c):
            failures.append(f"change at {c['position']:.3f} s after the restart is not near an annotated turn")
    for want in ("feed lost", "audio flows"):
        if sum(want in n for n in notes) < (1 if want == "feed lost" else 2):
            failures.append(f"live-stream.py did not say '{want}' on stderr")
    # How long the feed was away, said when it is back: at least the server's downtime.
    back = [float(m.group(1)) for n in notes for m in [re.search(r"after ([0-9.]+) s without a feed", n)] if m]
    if len(back) != 1 or back[0] < DOWN:
        failures.append(f"live-stream.py said the feed was away for {back} s, want one figure >= {DOWN} s")
    if any(c.get("timeline") for c in changes):
        failures.append("the restarted feed began a new time line; its time went on")
else:  # frozen
    # The freeze is a stall; the audio owed then comes at once and is analysed (or, as far as its
    # timestamps repeat analysed time, dropped with a warning): one stretch after the stall, so
    # one change from nobody there, not one per burst.
    resumed = changes[changes.index(stalls[0]) + 1:]
    from_nobody = [c for c in resumed if c["speaker"] and not c["previous"]]
    if len(from_nobody) > 1:
        failures.append(f"{len(from_nobody)} changes from nobody after the freeze: {from_nobody}")
    if not [c for c in resumed if c["speaker"] and c["previous"]]:
        failures.append("no change between speakers after the freeze")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
