package raftstore

// The file layout is raft-boltdb v2's: a raft-boltdb file copied bucket for
// bucket into a rivet file is a raftstore file, and back.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/rivetkv/rivet"
	"go.etcd.io/bbolt"
)

// compatLogs are entries with every field set, in both size classes of
// values, with a gap.
func compatLogs() []*raft.Log {
	var logs []*raft.Log
	for i := uint64(1); i <= 300; i++ {
		if i > 200 && i < 250 {
			continue
		}
		l := testLog(i)
		l.Type = raft.LogType(i % 6)
		l.AppendedAt = time.Unix(1_700_000_000+int64(i), int64(i)).In(time.FixedZone("z", 3600))
		if i%50 == 0 {
			l.Data = bytes.Repeat([]byte{byte(i)}, 70_000)
		}
		logs = append(logs, l)
	}
	return logs
}

var compatConf = map[string][]byte{
	"CurrentTerm":  {0, 0, 0, 0, 0, 0, 0, 9},
	"LastVoteTerm": {0, 0, 0, 0, 0, 0, 0, 9},
	"LastVoteCand": []byte("n1"),
}

// copyBoltToRivet copies every top-level bucket's keys and values.
func copyBoltToRivet(t *testing.T, from, to string) {
	t.Helper()
	src, err := bbolt.Open(from, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	dst, err := rivet.Open(to, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dst.Close() }()
	err = src.View(func(stx *bbolt.Tx) error {
		return dst.Update(func(dtx *rivet.Tx) error {
			return stx.ForEach(func(name []byte, sb *bbolt.Bucket) error {
				db, err := dtx.CreateBucket(name)
				if err != nil {
					return err
				}
				return sb.ForEach(func(k, v []byte) error { return db.Put(k, v) })
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyRivetToBolt copies every top-level bucket's keys and values.
func copyRivetToBolt(t *testing.T, from, to string) {
	t.Helper()
	src, err := rivet.Open(from, 0o600, &rivet.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	dst, err := bbolt.Open(to, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dst.Close() }()
	err = src.View(func(stx *rivet.Tx) error {
		return dst.Update(func(dtx *bbolt.Tx) error {
			return stx.ForEach(func(name []byte, sb *rivet.Bucket) error {
				db, err := dtx.CreateBucket(name)
				if err != nil {
					return err
				}
				return sb.ForEach(func(k, v []byte) error { return db.Put(k, v) })
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// compatStore is the part of both stores the comparison reads.
type compatStore interface {
	raft.LogStore
	raft.StableStore
}

// sameContent checks that a and b hold the same log and stable keys.
func sameContent(t *testing.T, a, b compatStore) {
	t.Helper()
	af, _ := a.FirstIndex()
	al, _ := a.LastIndex()
	bf, _ := b.FirstIndex()
	bl, _ := b.LastIndex()
	if af != bf || al != bl || af != 1 || al != 300 {
		t.Fatalf("bounds [%d, %d] and [%d, %d], want [1, 300]", af, al, bf, bl)
	}
	for i := af; i <= al+1; i++ {
		var la, lb raft.Log
		ea, eb := a.GetLog(i, &la), b.GetLog(i, &lb)
		if (ea == nil) != (eb == nil) || (ea != nil && !errors.Is(ea, raft.ErrLogNotFound)) {
			t.Fatalf("GetLog(%d): %v and %v", i, ea, eb)
		}
		if !reflect.DeepEqual(la, lb) {
			t.Fatalf("entry %d: %+v and %+v", i, la, lb)
		}
	}
	for k, want := range compatConf {
		va, err1 := a.Get([]byte(k))
		vb, err2 := b.Get([]byte(k))
		if err := errors.Join(err1, err2); err != nil || !bytes.Equal(va, want) || !bytes.Equal(vb, want) {
			t.Fatalf("%s: %q and %q, want %q (%v)", k, va, vb, want, err)
		}
	}
}

// writeBoltStore writes compatLogs and compatConf with raft-boltdb v2.
func writeBoltStore(t *testing.T, path string) {
	t.Helper()
	bs, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.StoreLogs(compatLogs()); err != nil {
		t.Fatal(err)
	}
	for k, v := range compatConf {
		if err := bs.Set([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := bs.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRivetImport: `rivet import` of a raft-boltdb v2 file gives a
// raftstore file with the same content, and `rivet export` of that gives
// a file raft-boltdb reads the same. It needs the rivet tool, named by
// RAFTSTORE_RIVET_BIN (go build -o /tmp/rivet ./cmd/rivet).
func TestRivetImport(t *testing.T) {
	bin := os.Getenv("RAFTSTORE_RIVET_BIN")
	if bin == "" {
		t.Skip("set RAFTSTORE_RIVET_BIN to a rivet binary")
	}
	dir := t.TempDir()
	boltPath := filepath.Join(dir, "raft-boltdb.db")
	rivetPath := filepath.Join(dir, "raftstore.db")
	backPath := filepath.Join(dir, "back.db")
	writeBoltStore(t, boltPath)
	for _, args := range [][]string{{"import", boltPath, rivetPath}, {"export", rivetPath, backPath}} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("rivet %s: %v\n%s", args[0], err, out)
		}
	}
	rs, err := NewStore(rivetPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close() }()
	for _, p := range []string{boltPath, backPath} {
		bs, err := raftboltdb.New(raftboltdb.Options{Path: p, BoltOptions: &bbolt.Options{ReadOnly: true}})
		if err != nil {
			t.Fatal(err)
		}
		sameContent(t, rs, bs)
		_ = bs.Close()
	}
	// The imported store takes raft's writes.
	if err := rs.StoreLogs(logsRange(301, 310)); err != nil {
		t.Fatal(err)
	}
	if err := rs.DeleteRange(1, 100); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, rs, 101, 310)
}

// TestBoltFileCopied: a raft-boltdb v2 file copied bucket for bucket into
// a rivet file opens as a raftstore with the same log and stable keys,
// and a raftstore file copied into a bbolt file opens in raft-boltdb.
func TestBoltFileCopied(t *testing.T) {
	dir := t.TempDir()
	boltPath := filepath.Join(dir, "raft-boltdb.db")
	writeBoltStore(t, boltPath)

	rivetPath := filepath.Join(dir, "raftstore.db")
	copyBoltToRivet(t, boltPath, rivetPath)
	rs, err := NewStore(rivetPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close() }()
	bs, err := raftboltdb.New(raftboltdb.Options{Path: boltPath, BoltOptions: &bbolt.Options{ReadOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bs.Close() }()
	sameContent(t, rs, bs)
	if v, err := rs.GetUint64([]byte("CurrentTerm")); err != nil || v != 9 {
		t.Fatalf("CurrentTerm %d, %v", v, err)
	}

	// raftstore's own writes are raft-boltdb's bytes: a store written by
	// raftstore, copied into bbolt, reads the same in raft-boltdb.
	ownPath := filepath.Join(dir, "own.db")
	own, err := NewStore(ownPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := own.StoreLogs(compatLogs()); err != nil {
		t.Fatal(err)
	}
	for k, v := range compatConf {
		if err := own.Set([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	backPath := filepath.Join(dir, "back.db")
	copyRivetToBolt(t, ownPath, backPath)
	back, err := raftboltdb.New(raftboltdb.Options{Path: backPath, BoltOptions: &bbolt.Options{ReadOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = back.Close() }()
	sameContent(t, rs, back)

	// Byte for byte: every value raftstore wrote equals raft-boltdb's.
	src, err := bbolt.Open(boltPath, 0o600, &bbolt.Options{ReadOnly: true})
	if err == nil {
		err = src.View(func(tx *bbolt.Tx) error {
			want := tx.Bucket([]byte("logs"))
			b, err := bbolt.Open(backPath, 0o600, &bbolt.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer func() { _ = b.Close() }()
			return b.View(func(btx *bbolt.Tx) error {
				got := btx.Bucket([]byte("logs"))
				n := 0
				err := want.ForEach(func(k, v []byte) error {
					n++
					if !bytes.Equal(got.Get(k), v) {
						t.Errorf("entry %x: raftstore wrote %x, raft-boltdb %x", k, got.Get(k), v)
					}
					return nil
				})
				if n != 251 {
					t.Errorf("%d entries compared, want 251", n)
				}
				return err
			})
		})
		_ = src.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}
