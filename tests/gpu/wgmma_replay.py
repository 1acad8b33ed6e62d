"""What the CPU replays of the Hopper wgmma GEMMs (test_fp8_wgmma_emu.py, test_int8_wgmma_emu.py) have in common."""
# Only logic that is the same for both kernels lives here: the mbarriers as PTX defines them, the scheduler that
# steps actors under several interleavings and reports a deadlock, the persistent tile walk, the tile-width and
# split-K rules (each kernel's tables passed in), checked reads and stores, and the pass/fail tally.  What each
# kernel does with them (its producer and consumers, box shapes, descriptors' stage layout, epilogue, source
# anchors) stays in its script.  The scripts import numpy first and exit 77 without it.
import random, sys

import numpy as np

# The geometry both kernels share (WG_* in plugins/fp8/cuda/wgmma.cu and in WGMMA_SRC): SMs of an H100 / H200,
# rows of a tile, K bytes of a stage, row tiles per raster group.
WG_SMS, WG_BM, WG_BK, WG_GROUP_M = 132, 128, 128, 8


class Fault(Exception):  # something the hardware would not survive (or the test forbids): fails that interleaving
    pass


class Deadlock(Exception):  # nothing runnable while something is unfinished: the kernel would hang
    pass


def cdiv(a, b):  # the kernels' and hosts' (a + b - 1) / b
    return (a + b - 1) // b


# ---- tile width, tile walk, split-K (host and device rules) ----------------------------------------------------------
def wg_plan(m, n, bns, eff, sts):
    """The host's plan (fp8_wgmma_plan, wgmma_plan of w8a8_int8): of the tile widths bns, the one whose waves of
    WG_SMS tiles carry the most useful columns weighted by eff; returns (width, its stages sts, shared bytes, tiles)."""
    tm = cdiv(m, WG_BM) if m > 0 else 0
    best, pick = -1, 0
    for i in range(3):
        tn = cdiv(n, bns[i]) if n > 0 else 0
        waves = cdiv(tm * tn, WG_SMS)
        score = tm * n * eff[i] // (waves * bns[i]) if waves > 0 else 0
        if score > best:
            best, pick = score, i
    smem = sts[pick] * (WG_BM * WG_BK + bns[pick] * WG_BK) + 1024
    tiles = tm * cdiv(n, bns[pick]) if n > 0 else 0
    return bns[pick], sts[pick], smem, tiles


def qc_wg_bn(m, n, bns, eff):
    """The device's choice of the same (qc_wg_bn in both kernels), kept apart from wg_plan so that the scripts can
    check the device's tables and arithmetic against the host's."""
    tm, best, pick = (m + WG_BM - 1) // WG_BM, -1, bns[0]
    for i in range(3):
        tn = (n + bns[i] - 1) // bns[i]
        waves = (tm * tn + WG_SMS - 1) // WG_SMS
        score = tm * n * eff[i] // (waves * bns[i])
        if score > best:
            best, pick = score, bns[i]
    return pick


def qc_wg_tile(t, tiles_m, tiles_n):
    """Tile t -> (row tile, column tile): groups of WG_GROUP_M row tiles, row fastest (qc_wg_tile)."""
    per_group = WG_GROUP_M * tiles_n
    first_m, in_g = t // per_group * WG_GROUP_M, t % per_group
    gsz = tiles_m - first_m if tiles_m - first_m < WG_GROUP_M else WG_GROUP_M
    return first_m + in_g % gsz, in_g // gsz


def tile_walk(bx, grid_x, tiles_m, tiles_n):
    """A persistent block's tiles, `for (t = blockIdx.x; t < tiles; t += gridDim.x)`: yields (t, tm, tn)."""
    t = bx
    while t < tiles_m * tiles_n:
        tm, tn = qc_wg_tile(t, tiles_m, tiles_n)
        yield t, tm, tn
        t += grid_x


def tile_walk_gaps(max_m=20, max_n=12):
    """Grids up to max_m x max_n tiles on which qc_wg_tile is not a bijection (a tile lost or done twice)."""
    gaps = []
    for tiles_m in range(1, max_m + 1):
        for tiles_n in range(1, max_n + 1):
            got = sorted(qc_wg_tile(t, tiles_m, tiles_n) for t in range(tiles_m * tiles_n))
            if got != [(a, b) for a in range(tiles_m) for b in range(tiles_n)]:
                gaps.append("%d x %d" % (tiles_m, tiles_n))
    return gaps


def qc_split_k_ways(tiles, stages, sms, min_stages, max_ways):
    """plugins/common/qc_split_k.h: K split in `ways` only while the tiles leave SMs idle, each way keeping at least
    min_stages of the K steps, at most max_ways."""
    if tiles <= 0 or tiles >= sms or stages <= 0 or min_stages <= 0:
        return 1
    s, by_k = sms // tiles, stages // min_stages
    if s > by_k:
        s = by_k
    if s > max_ways:
        s = max_ways
    return 1 if s < 1 else s


def qc_desc(addr):
    """The wgmma operand descriptor of both kernels: K-major, 128-byte swizzle, SBO 1024, shared address >> 4."""
    return ((addr & 0x3FFFF) >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)


# ---- a launch's memory and errors ------------------------------------------------------------------------------------
class LaunchBase:
    """What the scripts' Launch classes share; theirs set self.y (NaN-poisoned outputs), self.writes (a count per
    output) and self.errors, and may lower max_errors."""
    max_errors = 20

    def err(self, msg):  # an error found along the way: the run goes on, check() reports it
        if len(self.errors) < self.max_errors:
            self.errors.append(msg)

    @staticmethod
    def rd(arr, idx, name):
        """A device load of arr[idx]: out of bounds is a Fault (numpy would wrap negative indices around)."""
        idx = np.asarray(idx)
        if idx.size and (idx.min() < 0 or idx.max() >= arr.size):
            raise Fault("read %s[%d] outside its %d elements" %
                        (name, int(idx.max() if idx.max() >= arr.size else idx.min()), arr.size))
        return arr[idx]

    def store(self, idx, val, mask):
        """The epilogue's masked stores into y, counted per output (see write_errors); one past y is a Fault."""
        idx, val = idx[mask], val[mask]
        if idx.size == 0:
            return
        if idx.min() < 0 or idx.max() >= self.y.size:
            raise Fault("store to y[%d], past the %d outputs" % (int(idx.max()), self.y.size))
        np.add.at(self.writes, idx, 1)
        self.y[idx] = val


def write_errors(writes, n, times=False):
    """Every output stored exactly once: a tile, column or split lost or stored twice shows here (`times`: say how
    often the first repeated one was)."""
    errs = []
    if (writes == 0).any():
        i = int(np.argmax(writes == 0))
        errs.append("%d outputs never written (first y[%d,%d])" % (int((writes == 0).sum()), i // n, i % n))
    if (writes > 1).any():
        i = int(np.argmax(writes > 1))
        errs.append("%d outputs written more than once (first y[%d,%d]%s)" %
                    (int((writes > 1).sum()), i // n, i % n, ", %d times" % int(writes[i]) if times else ""))
    return errs


# ---- mbarriers and TMA boxes -----------------------------------------------------------------------------------------
class MBar:
    """An mbarrier as PTX defines it: `count` arrivals and the expected tx bytes complete a phase, which flips its
    parity; try_wait.parity p passes once the phase of parity p completed (so a fresh one passes parity 1 at once).
    Actors blocked on it wait in `waiters` and go back to the scheduler's `ready` list when their phase completes.
    strict: more arrivals than the count in one phase (undefined in PTX) is a Fault, not an early phase."""
    __slots__ = ('name', 'count', 'pending', 'tx', 'phase', 'waiters', 'ready', 'strict')

    def __init__(self, name, count, ready, strict=False):  # qc_mbar_init
        self.name, self.count, self.pending, self.tx, self.phase = name, count, count, 0, 0
        self.waiters, self.ready, self.strict = [], ready, strict

    def _complete(self):  # every arrival and byte in: the phase completes, its parity's waiters run again
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count
            still = []
            for a in self.waiters:
                (self.ready.append if self.passed(a.parity) else still.append)(a)
            self.waiters = still

    def arrive(self):  # qc_mbar_arrive
        self.pending -= 1
        if self.strict and self.pending < 0:
            raise Fault("%s: more arrivals than its count" % self.name)
        self._complete()

    def arrive_expect_tx(self, nbytes):  # qc_mbar_expect_tx: mbarrier.arrive.expect_tx
        self.tx += nbytes
        self.arrive()

    def complete_tx(self, nbytes):  # a TMA's complete_tx::bytes
        self.tx -= nbytes
        self._complete()

    def passed(self, parity):  # mbarrier.try_wait.parity
        return (self.phase & 1) != parity

    def at_rest(self):  # nothing pending: how every barrier must be left when the kernel exits
        return self.pending == self.count and self.tx == 0


class TmaBox:
    """One TMA box in flight into ring stage st of block B (slot -1: the activation box, else the weight box's index);
    when the scheduler lands it, the stage holds its tag and its bytes count on the barrier."""
    __slots__ = ('B', 'st', 'slot', 'tag', 'bar', 'nbytes')

    def __init__(self, B, st, slot, tag, bar, nbytes):
        self.B, self.st, self.slot, self.tag, self.bar, self.nbytes = B, st, slot, tag, bar, nbytes

    def land(self):  # the bytes reach the stage, then complete_tx on its barrier
        if self.slot < 0:
            self.B.sa[self.st] = self.tag
        else:
            self.B.sb[self.st][self.slot] = self.tag
        self.bar.complete_tx(self.nbytes)


# ---- the scheduler ---------------------------------------------------------------------------------------------------
class Actor:
    """A thread, warp or warpgroup (in lockstep) as a generator.  It yields None where others may run,
    ('m', mbar, parity) before an mbarrier try_wait.parity loop, or ('n', nbar) at a named barrier (an object whose
    arrive(actor) says whether this arrival releases it, and which puts its waiters back on the ready list); it is
    resumed only once that wait passes."""
    __slots__ = ('name', 'gen', 'bar', 'parity', 'done', 'role', 'what')

    def __init__(self, name, gen, role):
        self.name, self.gen, self.role = name, gen, role
        self.bar, self.parity, self.done, self.what = None, 0, False, ""  # what: the wait it is at, for a Deadlock

    def step(self, ready):  # run it to its next yield, or back to waiting if its phase went by before it ran
        if self.bar is not None and not self.bar.passed(self.parity):  # the phase went by again: spin on
            ready.remove(self)
            self.bar.waiters.append(self)
            return
        self.bar = None
        try:
            r = next(self.gen)
        except StopIteration:
            self.done = True
            ready.remove(self)
            return
        if r is None:
            return
        if r[0] == 'm':
            self.bar, self.parity = r[1], r[2]
            self.what = "%s waits %s parity %d" % (self.name, r[1].name, r[2])
            if not self.bar.passed(self.parity):
                ready.remove(self)
                self.bar.waiters.append(self)
        else:
            self.what = "%s at named %s" % (self.name, r[1].name)
            if not r[1].arrive(self):
                ready.remove(self)


def run_actors(actors, ready, events, policy, seed, max_steps, held=None, tidy=None, blocked=None):
    """Steps the actors and lands the copies in flight, one at a time, until all is done; `events` is a list of
    queues (TMA boxes, cp.async copies, ...) whose items have land().  The interleavings (`policy`):
      eager    copies land at once, in issue order, earlier queues first; actors round robin
      laggard  eager, but the `held(actor)` ones run only when nothing else can
      lazy     a random actor; a copy (a random one of the first non-empty queue) lands only when none can run
      starve   random, but the `held(actor)` ones run only when nothing else can
      random   any actor or copy, uniformly
    `ready` is the list the barriers put woken actors on.  tidy(), if given, runs first each step and may drop copies
    that landed by other means (True: it did, which takes the step).  A Deadlock names up to three blocked actors,
    each as `blocked(actor)` words it (default: what it waits for)."""
    rnd = random.Random(seed)
    rot = steps = 0
    while ready or any(events):
        steps += 1
        if steps > max_steps:
            raise Fault("no progress after %d steps" % steps)
        if tidy is not None and tidy():
            continue
        if policy in ("eager", "laggard"):
            q = next((q for q in events if q), None)
            if q is not None:
                q.pop(0).land()
                continue
            pool = ready
            if policy == "laggard":
                pool = [a for a in ready if not held(a)] or ready
            rot = rot + 1 if rot + 1 < len(pool) else 0
            pick = pool[rot]
        elif policy == "lazy":
            if not ready:
                q = next(q for q in events if q)
                q.pop(rnd.randrange(len(q))).land()
                continue
            pick = rnd.choice(ready)
        else:
            pool = ready
            if policy == "starve":
                pool = [a for a in ready if not held(a)]
                if not pool and not any(events):
                    pool = ready
            nev = len(pool) + sum(len(q) for q in events)
            if nev == 0:
                break
            i = rnd.randrange(nev)
            if i >= len(pool):
                i -= len(pool)
                for q in events:
                    if i < len(q):
                        q.pop(i).land()
                        break
                    i -= len(q)
                continue
            pick = pool[i]
        pick.step(ready)
    live = [a for a in actors if not a.done]
    if live:
        raise Deadlock("%d actors blocked, none runnable: %s%s" % (
            len(live), "; ".join(blocked(a) if blocked else a.what for a in live[:3]), " ..." if len(live) > 3 else ""))


def replay(policies, seed, launch, simulate, check, differ=""):
    """One problem under each interleaving: a fresh launch() per policy, simulate(L, policy, seed) and check(L) (a
    list of errors).  A deadlock or fault is that policy's error; y must not differ bitwise from the first
    interleaving's (`differ` is added to that error).  Returns the errors, each prefixed by its policy."""
    errs, y0 = [], None
    for pi, pol in enumerate(policies):
        L = launch()
        try:
            simulate(L, pol, seed * 7919 + pi)
        except Deadlock as e:
            errs.append("%s: DEADLOCK: %s" % (pol, e))
            continue
        except Fault as e:
            errs.append("%s: %s" % (pol, e))
            continue
        e = check(L)
        errs += ["%s: %s" % (pol, x) for x in e]
        if y0 is None:
            y0 = L.y.copy()
        elif not e and not np.array_equal(y0.view(np.uint32), L.y.view(np.uint32)):
            errs.append("%s: y differs bitwise from the %s interleaving's%s" % (pol, policies[0], differ))
    return errs


# ---- the tally -------------------------------------------------------------------------------------------------------
class Tally:
    """A script's checks: counts them, prints failures (every one when verbose) and the final line."""

    def __init__(self, prog, verbose):
        self.prog, self.verbose, self.passed, self.failed = prog, verbose, 0, 0

    def report(self, ok, line):  # one check and the line that says what it checked
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        if self.verbose or not ok:
            print("%s: %s %s" % (self.prog, "ok  " if ok else "FAIL", line))

    def mutation(self, name, what, how):
        """A deliberate bug: `how` is how a case caught it (None: nothing did, which fails)."""
        print("%s: mutation %-12s %s -- %s" % (self.prog, name, "detected" if how else "NOT DETECTED", what))
        if how:
            print("    " + (how if len(how) < 230 else how[:227] + "..."))
        self.report(how is not None, "mutation %s" % name)

    def hunt(self, mutations, cases, caught):
        """Each (name, what) of mutations injected into the cases in turn until one catches it: caught(case, name)
        returns how (a line) or None."""
        for name, what in mutations:
            how = None
            for c in cases:
                how = caught(c, name)
                if how:
                    break
            self.mutation(name, what, how)

    def finish(self, tail=""):  # the summary line; exit status 1 on any failure
        print("%s: %d passed, %d failed%s" % (self.prog, self.passed, self.failed, tail))
        sys.exit(1 if self.failed else 0)
