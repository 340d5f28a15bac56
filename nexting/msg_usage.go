package nexting

// usage/1 (profiles sheet, "usage/1"): informational model/token counters.
// Closed messages: billing fields are not part of the profile (vectors
// usage-v1 "billing field forbidden", "usage clear extra field").

// Usage (host → device) publishes a counter snapshot. Counters are
// non-negative integers of at most 2^53-1.
type Usage struct {
	Model        string // 1–64 bytes, no control characters
	InputTokens  uint64
	OutputTokens uint64
	CachedTokens *uint64       // optional
	Context      *ContextUsage // optional; context_used and context_limit travel as a pair
}

// ContextUsage is the context window pair, Used ≤ Limit.
type ContextUsage struct {
	Used  uint64
	Limit uint64
}

// UsageClear (host → device) clears the counters. It has no fields.
type UsageClear struct{}

func (Usage) Type() Type      { return TypeUsage }
func (UsageClear) Type() Type { return TypeUsageClear }

func (m Usage) validate() *Error {
	e := firstErr(
		checkText("model", m.Model, 1, maxLabelBytes, noControl),
		checkCounter("input_tokens", m.InputTokens),
		checkCounter("output_tokens", m.OutputTokens))
	if e != nil {
		return e
	}
	if m.CachedTokens != nil {
		if e := checkCounter("cached_tokens", *m.CachedTokens); e != nil {
			return e
		}
	}
	if c := m.Context; c != nil {
		if e := firstErr(checkCounter("context_used", c.Used), checkCounter("context_limit", c.Limit)); e != nil {
			return e
		}
		if c.Used > c.Limit {
			return badMessage("context_used", "must not exceed context_limit")
		}
	}
	return nil
}

func checkCounter(field string, v uint64) *Error {
	if v > maxSafeInteger {
		return badMessage(field, "must be 0-9007199254740991")
	}
	return nil
}

func (UsageClear) validate() *Error { return nil }

func (m Usage) appendJSON(w *writer) {
	w.begin(TypeUsage)
	w.str("model", m.Model)
	w.uint("input_tokens", m.InputTokens)
	w.uint("output_tokens", m.OutputTokens)
	if m.CachedTokens != nil {
		w.uint("cached_tokens", *m.CachedTokens)
	}
	if m.Context != nil {
		w.uint("context_used", m.Context.Used)
		w.uint("context_limit", m.Context.Limit)
	}
}

func (UsageClear) appendJSON(w *writer) { w.begin(TypeUsageClear) }

var (
	usageFields      = []string{"v", "t", "model", "input_tokens", "output_tokens", "cached_tokens", "context_used", "context_limit"}
	usageClearFields = []string{"v", "t"}
)

func parseUsage(r *reader) Message {
	o := r.root
	r.closed(o, top, usageFields)
	m := Usage{
		Model:        r.str(o, top, "model"),
		InputTokens:  r.u64At(r.need(o, top, "input_tokens"), top.field("input_tokens")),
		OutputTokens: r.u64At(r.need(o, top, "output_tokens"), top.field("output_tokens")),
	}
	if n := r.get(o, "cached_tokens"); n >= 0 {
		v := r.u64At(n, top.field("cached_tokens"))
		m.CachedTokens = &v
	}
	used, limit := r.get(o, "context_used"), r.get(o, "context_limit")
	switch {
	case used >= 0 && limit >= 0:
		m.Context = &ContextUsage{Used: r.u64At(used, top.field("context_used")), Limit: r.u64At(limit, top.field("context_limit"))}
	case used >= 0:
		r.fail(top.field("context_limit"), "required with context_used")
	case limit >= 0:
		r.fail(top.field("context_used"), "required with context_limit")
	}
	return m
}

func parseUsageClear(r *reader) Message {
	r.closed(r.root, top, usageClearFields)
	return UsageClear{}
}
