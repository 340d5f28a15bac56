package nexting

// navigation/1: a bounded option list sharing interactive focus with
// approval/1 (profiles sheet, "navigation/1"). Like every interaction
// profile message these are closed: an unknown field fails (published
// schema: additionalProperties false; vectors navigation-v1 "unknown field").

// NavPresent (host → device) presents 2–8 options.
type NavPresent struct {
	ID        string
	Items     []string // 2–8 unique, each 1–64 bytes without control characters
	Cursor    int      // 0…len(Items)-1
	TTLMillis int      // "ttl": 1–300000
}

// NavMove (device → host) is an advisory cursor move.
type NavMove struct {
	ID  string
	Dir Direction
	Seq uint32
}

// NavSelect (device → host) selects one option. The codec bounds Index to
// 0–7; the host also checks it against the presentation.
type NavSelect struct {
	ID    string
	Index int
	Seq   uint32
}

// NavResolved (host → device) finalizes a navigation request.
type NavResolved struct {
	ID     string
	Reason NavReason // "r"
}

func (NavPresent) Type() Type  { return TypeNavPresent }
func (NavMove) Type() Type     { return TypeNavMove }
func (NavSelect) Type() Type   { return TypeNavSelect }
func (NavResolved) Type() Type { return TypeNavResolved }

func (m NavPresent) validate() *Error {
	if e := firstErr(checkID("id", m.ID), checkCount("items", len(m.Items), minNavItems, maxNavItems)); e != nil {
		return e
	}
	for i, it := range m.Items {
		if e := checkText(elemField("items", i, ""), it, 1, maxLabelBytes, noControl); e != nil {
			return e
		}
		for _, prev := range m.Items[:i] {
			if prev == it {
				return badMessage(elemField("items", i, ""), "duplicate item")
			}
		}
	}
	return firstErr(
		checkRange("cursor", int64(m.Cursor), 0, int64(len(m.Items)-1)),
		checkRange("ttl", int64(m.TTLMillis), 1, MaxTTLMillis))
}

func (m NavMove) validate() *Error {
	return firstErr(checkID("id", m.ID), checkEnum("dir", m.Dir.Valid()))
}

func (m NavSelect) validate() *Error {
	return firstErr(checkID("id", m.ID), checkRange("index", int64(m.Index), 0, maxNavIndex))
}

func (m NavResolved) validate() *Error {
	return firstErr(checkID("id", m.ID), checkEnum("r", m.Reason.Valid()))
}

func (m NavPresent) appendJSON(w *writer) {
	w.begin(TypeNavPresent)
	w.str("id", m.ID)
	w.list("items", len(m.Items), func(i int) { w.quote(m.Items[i]) })
	w.int("cursor", int64(m.Cursor))
	w.int("ttl", int64(m.TTLMillis))
}

func (m NavMove) appendJSON(w *writer) {
	w.begin(TypeNavMove)
	w.str("id", m.ID)
	w.str("dir", string(m.Dir))
	w.uint("seq", uint64(m.Seq))
}

func (m NavSelect) appendJSON(w *writer) {
	w.begin(TypeNavSelect)
	w.str("id", m.ID)
	w.int("index", int64(m.Index))
	w.uint("seq", uint64(m.Seq))
}

func (m NavResolved) appendJSON(w *writer) {
	w.begin(TypeNavResolved)
	w.str("id", m.ID)
	w.str("r", string(m.Reason))
}

var (
	navPresentFields  = []string{"v", "t", "id", "items", "cursor", "ttl"}
	navMoveFields     = []string{"v", "t", "id", "dir", "seq"}
	navSelectFields   = []string{"v", "t", "id", "index", "seq"}
	navResolvedFields = []string{"v", "t", "id", "r"}
)

func parseNavPresent(r *reader) Message {
	o := r.root
	r.closed(o, top, navPresentFields)
	m := NavPresent{ID: r.str(o, top, "id"), Cursor: r.int(o, top, "cursor"), TTLMillis: r.int(o, top, "ttl")}
	first, n := r.array(o, top, "items")
	if r.err != nil {
		return nil
	}
	if n > maxNavItems {
		r.fail(top.field("items"), "must have 2-8 entries")
		return nil
	}
	m.Items = make([]string, 0, n)
	for i, c := 0, first; c >= 0; i, c = i+1, r.next(c) {
		m.Items = append(m.Items, r.strAt(c, top.field("items").elem(i)))
	}
	return m
}

func parseNavMove(r *reader) Message {
	o := r.root
	r.closed(o, top, navMoveFields)
	return NavMove{ID: r.str(o, top, "id"), Dir: Direction(r.str(o, top, "dir")), Seq: r.u32(o, top, "seq")}
}

func parseNavSelect(r *reader) Message {
	o := r.root
	r.closed(o, top, navSelectFields)
	return NavSelect{ID: r.str(o, top, "id"), Index: r.int(o, top, "index"), Seq: r.u32(o, top, "seq")}
}

func parseNavResolved(r *reader) Message {
	o := r.root
	r.closed(o, top, navResolvedFields)
	return NavResolved{ID: r.str(o, top, "id"), Reason: NavReason(r.str(o, top, "r"))}
}
