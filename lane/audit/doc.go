// Package audit is the lane's audit writer: the core hands it rows
// (Writer.Add, which never blocks) and it writes them to the registry from
// one goroutine, in batches, through store.Audit (which appends them to the
// audit trail's hash chain).
//
// Where to start:
//
//   - writer.go: Writer, its queue, its batches, the drop rows and count
//     when the queue is full or a write fails, Flush and Close, and the
//     retention pruning at start and every PruneEvery.
//   - window.go: refusalWindows, the pure core that merges identical
//     refusals (Config.Merge says which events are refusals) within Window
//     into one row with a count.
//
// The event names are the core's (lane.EventName); this package names only
// its own row, EventRowsDropped. docs/audit.md describes the trail.
package audit
