package bench

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefragEtcdCopiesEveryBucket(t *testing.T) {
	e := boltEngine{name: BaselineEngine}
	path := filepath.Join(t.TempDir(), "etcd.db")
	db, err := e.Open(path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	// 7 keys in "key", 3 in "meta", none in BucketName: 10 keys.
	var keys, metas []KV
	for i := range 7 {
		keys = append(keys, KV{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	for i := range 3 {
		metas = append(metas, KV{Key: fmt.Appendf(nil, "m%d", i), Value: []byte("x")})
	}
	if err := db.UpdateBuckets([]BucketKVs{{Bucket: etcdKeyBucket, KVs: keys}, {Bucket: etcdMetaBucket, KVs: metas}}); err != nil {
		t.Fatal(err)
	}
	liveBefore, err := db.(SpaceCounter).LiveBytes()
	if err != nil {
		t.Fatal(err)
	}
	pairs, sumBefore, err := db.(Digester).Digest(etcdKeyBucket)
	if err != nil || pairs != 7 {
		t.Fatalf("digest before: %d pairs, %v", pairs, err)
	}

	fresh, st, err := e.DefragEtcd(db, 3)
	db = fresh
	if err != nil {
		t.Fatal(err)
	}
	// Commits after keys 3, 6 and 9, and the last one.
	if st.Txns != 4 {
		t.Errorf("%d copy transactions, want 4", st.Txns)
	}
	if st.PagesWritten < 4 {
		t.Errorf("the copy wrote %d pages, want at least one per bucket and transaction", st.PagesWritten)
	}
	liveAfter, err := db.(SpaceCounter).LiveBytes()
	if err != nil || liveAfter != liveBefore {
		t.Errorf("live bytes %d after the copy, %d before (%v)", liveAfter, liveBefore, err)
	}
	if pairs, sumAfter, err := db.(Digester).Digest(etcdKeyBucket); err != nil || pairs != 7 || sumAfter != sumBefore {
		t.Errorf("bucket key after the copy: %d pairs, digest equal %v (%v)", pairs, sumAfter == sumBefore, err)
	}
	if left, _ := filepath.Glob(path + ".defrag"); len(left) != 0 {
		t.Errorf("the copy's file is left behind: %v", left)
	}

	// A nested bucket is refused, and the DB stays usable.
	if err := db.(NestedUpdater).UpdateNested([]byte("parent"), []BucketKVs{{Bucket: []byte("child"), KVs: metas}}); err != nil {
		t.Fatal(err)
	}
	back, _, err := e.DefragEtcd(db, 3)
	if err == nil || !strings.Contains(err.Error(), "nested bucket") {
		t.Fatalf("defragmenting a nested bucket: %v", err)
	}
	if back != db {
		t.Fatal("a failed copy did not return the DB it was given")
	}
	if found, err := db.Get(etcdKeyBucket, [][]byte{[]byte("k0")}); err != nil || found != 1 {
		t.Errorf("after a failed copy: found %d, %v", found, err)
	}
}
