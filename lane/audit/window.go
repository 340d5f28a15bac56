package audit

import (
	"cmp"
	"slices"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// refusalWindows merges identical refusals into one audit row with a
// count: the first refusal of a kind (event, reason, remote address,
// identity, device) opens a window; those that follow within it add to its
// count; the row is written when the window closes. A flood of refused
// upgrades from one address is one row per window, not one per attempt.
//
// It is a pure core: time comes in as arguments. The open windows are
// bounded; a refusal that finds them all taken by other kinds is not held
// (add reports false) and is written as it is, so memory stays bounded and
// nothing is lost.
type refusalWindows struct {
	length time.Duration
	max    int
	seq    uint64
	open   map[refusalKind]*refusalWindow
}

// refusalKind is what makes two refusals identical.
type refusalKind struct{ event, reason, remote, identity, device string }

type refusalWindow struct {
	row    store.AuditEvent
	closes time.Time
	seq    uint64 // opening order
}

func newRefusalWindows(length time.Duration, max int) refusalWindows {
	return refusalWindows{length: length, max: max, open: map[refusalKind]*refusalWindow{}}
}

// add holds a refusal seen at now: it joins the open window of its kind or
// opens one. False when the windows are full: write the row at once.
func (w *refusalWindows) add(e store.AuditEvent, now time.Time) bool {
	k := refusalKind{e.Event, e.Reason, e.RemoteAddr, e.IdentityID, e.DeviceID}
	if win, ok := w.open[k]; ok {
		win.row.Count += max(e.Count, 1)
		return true
	}
	if len(w.open) >= w.max {
		return false
	}
	w.seq++
	e.Count = max(e.Count, 1)
	w.open[k] = &refusalWindow{row: e, closes: now.Add(w.length), seq: w.seq}
	return true
}

// closed removes and returns the rows of the windows closed by now, in
// the order they were opened.
func (w *refusalWindows) closed(now time.Time) []store.AuditEvent {
	return w.take(func(win *refusalWindow) bool { return !win.closes.After(now) })
}

// all removes and returns every held row, in the order the windows were
// opened (a flush, the writer's close).
func (w *refusalWindows) all() []store.AuditEvent {
	return w.take(func(*refusalWindow) bool { return true })
}

func (w *refusalWindows) take(done func(*refusalWindow) bool) []store.AuditEvent {
	var wins []*refusalWindow
	for k, win := range w.open {
		if done(win) {
			wins = append(wins, win)
			delete(w.open, k)
		}
	}
	slices.SortFunc(wins, func(a, b *refusalWindow) int { return cmp.Compare(a.seq, b.seq) })
	rows := make([]store.AuditEvent, len(wins))
	for i, win := range wins {
		rows[i] = win.row
	}
	return rows
}

// next is when the first open window closes; false when none is open.
func (w *refusalWindows) next() (time.Time, bool) {
	var first time.Time
	for _, win := range w.open {
		if first.IsZero() || win.closes.Before(first) {
			first = win.closes
		}
	}
	return first, !first.IsZero()
}
