package btree

// Spares keeps the buffers of written runs for the next write
// transaction's Spill to encode nodes and blob extents into, so that a
// transaction allocates no page buffer for what an earlier one freed.
// Buffers are kept by length, one to MaxSpareRun pages (the longest
// packed leaf), and at most a bounded number of pages in all.
//
// Every encoder overwrites the whole buffer it is given, so nothing of a
// buffer's last use reaches the file. Spares is not safe for concurrent
// use: the DB's writer lock guards it.
type Spares struct {
	lists [MaxSpareRun][][]byte // lists[n-1] holds buffers of n pages
	pages int                   // pages held in all
}

// MaxSpareRun is the longest run, in pages, that Spares keeps.
const MaxSpareRun = 8

// Get returns a kept buffer of exactly pages pages of pageSize bytes, or
// nil if there is none.
func (s *Spares) Get(pages uint64, pageSize int) []byte {
	if s == nil || pages == 0 || pages > MaxSpareRun {
		return nil
	}
	l := s.lists[pages-1]
	k := len(l)
	if k == 0 {
		return nil
	}
	buf := l[k-1]
	l[k-1] = nil
	s.lists[pages-1] = l[:k-1]
	s.pages -= int(pages)
	if len(buf) != int(pages)*pageSize {
		// Kept under another page size: drop it.
		return nil
	}
	return buf
}

// Put keeps buf, a buffer of whole pages of pageSize bytes, if it is at
// most MaxSpareRun pages long and the kept pages stay within limit. It
// reports whether it kept it.
func (s *Spares) Put(buf []byte, pageSize, limit int) bool {
	if pageSize <= 0 || len(buf) == 0 || len(buf)%pageSize != 0 {
		return false
	}
	pages := len(buf) / pageSize
	if pages > MaxSpareRun || s.pages+pages > limit {
		return false
	}
	s.lists[pages-1] = append(s.lists[pages-1], buf)
	s.pages += pages
	return true
}

// Pages returns the pages Spares holds in all.
func (s *Spares) Pages() int { return s.pages }
