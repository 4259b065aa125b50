package memstore

import (
	"testing"
	"unsafe"
)

// TestHotFieldsLayout pins the layout the record and shard comments
// describe: what a Take of a bucket limit writes in one 32-byte block of
// a record allocated 32-byte aligned (Go's 160-byte size class), and the
// shard's per-Take writes, the hot record's counts among them, on the
// lock's cache line, shards a whole number of lines apart.
func TestHotFieldsLayout(t *testing.T) {
	var r record
	st := unsafe.Offsetof(r.inline)
	for name, off := range map[string]uintptr{
		"touched": unsafe.Offsetof(r.touched),
		"exp":     st + unsafe.Offsetof(r.inline[0].exp),
		"ts":      st + unsafe.Offsetof(r.inline[0].ts),
		"used":    st + unsafe.Offsetof(r.inline[0].used),
	} {
		if off < 32 || off+8 > 64 {
			t.Errorf("record.%s at bytes %d-%d, want within 32-63", name, off, off+8)
		}
	}
	if size := unsafe.Sizeof(r); size <= 144 || size > 160 {
		t.Errorf("record is %d bytes: outside the 160-byte size class, whose objects are 32-byte aligned", size)
	}
	var sh shard
	for name, off := range map[string]uintptr{
		"mu":         unsafe.Offsetof(sh.mu),
		"last":       unsafe.Offsetof(sh.last),
		"recent":     unsafe.Offsetof(sh.recent),
		"recentHash": unsafe.Offsetof(sh.recentHash),
		"hot":        unsafe.Offsetof(sh.hot),
		"hotExp":     unsafe.Offsetof(sh.hotExp),
		"hotTS":      unsafe.Offsetof(sh.hotTS),
		"hotN":       unsafe.Offsetof(sh.hotN),
	} {
		if off+8 > 64 {
			t.Errorf("shard.%s at byte %d, want on the lock's cache line", name, off)
		}
	}
	if size := unsafe.Sizeof(sh); size%64 != 0 {
		t.Errorf("shard is %d bytes, want a multiple of 64", size)
	}
}
