package raftstore

// A 3-node hashicorp/raft cluster on raft's in-memory transport, each node
// with its log and stable store in a raftstore file and its snapshots in a
// raft.FileSnapshotStore, both in the node's own directory.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rivetkv/rivet"
)

// cmdSize is the size of a command: an 8-byte id and filler.
const cmdSize = 64

// command returns the command that adds id to the FSM.
func command(id uint64) []byte {
	cmd := make([]byte, cmdSize)
	binary.BigEndian.PutUint64(cmd, id)
	for i := 8; i < cmdSize; i++ {
		cmd[i] = byte(id) + byte(i)
	}
	return cmd
}

// setFSM is a state machine holding the set of command ids applied.
type setFSM struct {
	mu  sync.Mutex
	ids map[uint64]bool
	// at records the id applied at each log index, across the node's
	// restarts and snapshot restores.
	at  map[uint64]uint64
	bad error // a command that was not command(id)
	// last is the index of the last entry applied, or of the snapshot
	// restored: raft's AppliedIndex runs ahead of it, since raft counts
	// an entry applied once it has handed it to the FSM's goroutine.
	last uint64
}

func newSetFSM(at map[uint64]uint64) *setFSM { return &setFSM{ids: map[uint64]bool{}, at: at} }

// Apply implements raft.FSM.
func (f *setFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(l.Data) != cmdSize || !bytes.Equal(l.Data, command(binary.BigEndian.Uint64(l.Data))) {
		f.bad = fmt.Errorf("entry %d: malformed command %x", l.Index, l.Data)
		return f.bad
	}
	id := binary.BigEndian.Uint64(l.Data)
	if prev, ok := f.at[l.Index]; ok && prev != id {
		f.bad = fmt.Errorf("entry %d: applied command %d, earlier %d", l.Index, id, prev)
		return f.bad
	}
	f.ids[id] = true
	f.at[l.Index] = id
	f.last = max(f.last, l.Index)
	return nil
}

// Snapshot implements raft.FSM. Raft calls it between Applies.
func (f *setFSM) Snapshot() (raft.FSMSnapshot, error) {
	ids := f.sorted()
	return &setSnapshot{last: f.lastApplied(), ids: ids}, nil
}

// lastApplied returns the index of the last entry the FSM applied (or
// the snapshot it restored).
func (f *setFSM) lastApplied() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Restore implements raft.FSM.
func (f *setFSM) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if len(b) < 8 || len(b)%8 != 0 {
		return fmt.Errorf("snapshot of %d bytes", len(b))
	}
	last := binary.BigEndian.Uint64(b)
	ids := make(map[uint64]bool, len(b)/8-1)
	for i := 8; i < len(b); i += 8 {
		ids[binary.BigEndian.Uint64(b[i:])] = true
	}
	f.mu.Lock()
	f.ids = ids
	f.last = last
	f.mu.Unlock()
	return nil
}

// sorted returns the ids applied, in order.
func (f *setFSM) sorted() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]uint64, 0, len(f.ids))
	for id := range f.ids {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// setSnapshot is the FSM's last applied index, then its ids.
type setSnapshot struct {
	last uint64
	ids  []uint64
}

func (s *setSnapshot) Persist(sink raft.SnapshotSink) error {
	b := make([]byte, 0, 8+8*len(s.ids))
	b = binary.BigEndian.AppendUint64(b, s.last)
	for _, id := range s.ids {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	if _, err := sink.Write(b); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *setSnapshot) Release() {}

// syncWriter is raft's log output, kept to print when a test fails.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 1<<20 {
		w.buf.Reset()
	}
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// clusterNode is one member; raft is nil while it is stopped.
type clusterNode struct {
	id    raft.ServerID
	addr  raft.ServerAddress
	dir   string
	store *Store
	trans *raft.InmemTransport
	fsm   *setFSM
	raft  *raft.Raft
	// applied is the FSMs' record of applications (setFSM.at), kept
	// across restarts.
	applied map[uint64]uint64
}

// cluster is three nodes in dir/n0, dir/n1, dir/n2.
type cluster struct {
	nodes [3]*clusterNode
	log   *syncWriter
	// fatalf reports a failure (t.Fatalf, or the child's exit).
	fatalf func(format string, args ...any)
}

func newCluster(dir string, fatalf func(string, ...any)) *cluster {
	c := &cluster{log: &syncWriter{}, fatalf: fatalf}
	for i := range c.nodes {
		id := fmt.Sprintf("n%d", i)
		c.nodes[i] = &clusterNode{id: raft.ServerID(id), addr: raft.ServerAddress(id), dir: filepath.Join(dir, id), applied: map[uint64]uint64{}}
	}
	return c
}

// config is raft's configuration for node i: short timeouts, and
// snapshots and log compaction often enough that a restarted follower
// needs an InstallSnapshot.
func (c *cluster) config(i int) *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = c.nodes[i].id
	conf.HeartbeatTimeout = 100 * time.Millisecond
	conf.ElectionTimeout = 100 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotInterval = 100 * time.Millisecond
	conf.SnapshotThreshold = 1024
	conf.TrailingLogs = 512
	conf.LogOutput = c.log
	conf.LogLevel = "WARN"
	return conf
}

// start opens node i's files and starts it, bootstrapping a new cluster
// of the three nodes if its store is empty.
func (c *cluster) start(i int) {
	n := c.nodes[i]
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		c.fatalf("node %d: %v", i, err)
	}
	var err error
	if n.store, err = New(Options{Path: filepath.Join(n.dir, "raft.db")}); err != nil {
		c.fatalf("node %d: %v", i, err)
	}
	snaps, err := raft.NewFileSnapshotStore(n.dir, 2, c.log)
	if err != nil {
		c.fatalf("node %d: %v", i, err)
	}
	_, n.trans = raft.NewInmemTransport(n.addr)
	for _, o := range c.nodes {
		if o != n && o.raft != nil {
			n.trans.Connect(o.addr, o.trans)
			o.trans.Connect(n.addr, n.trans)
		}
	}
	n.fsm = newSetFSM(n.applied)
	conf := c.config(i)
	existing, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		c.fatalf("node %d: %v", i, err)
	}
	if !existing {
		var servers []raft.Server
		for _, o := range c.nodes {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: o.id, Address: o.addr})
		}
		if err := raft.BootstrapCluster(conf, n.store, n.store, snaps, n.trans, raft.Configuration{Servers: servers}); err != nil {
			c.fatalf("node %d: bootstrap: %v", i, err)
		}
	}
	if n.raft, err = raft.NewRaft(conf, n.fsm, n.store, n.store, snaps, n.trans); err != nil {
		c.fatalf("node %d: %v", i, err)
	}
}

// stop shuts node i down and closes its store.
func (c *cluster) stop(i int) {
	n := c.nodes[i]
	if err := n.raft.Shutdown().Error(); err != nil {
		c.fatalf("node %d: shutdown: %v", i, err)
	}
	n.raft = nil
	for _, o := range c.nodes {
		if o != n && o.trans != nil {
			o.trans.Disconnect(n.addr)
		}
	}
	_ = n.trans.Close()
	if err := n.store.Close(); err != nil {
		c.fatalf("node %d: close: %v", i, err)
	}
}

// stopAll stops the running nodes.
func (c *cluster) stopAll() {
	for i, n := range c.nodes {
		if n.raft != nil {
			c.stop(i)
		}
	}
}

// leader waits for a running node to lead and returns its number.
func (c *cluster) leader() int {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, n := range c.nodes {
			if n.raft != nil && n.raft.State() == raft.Leader {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.fatalf("no leader after 30 s")
	return -1
}

// apply applies the commands of ids from..to on the leader, up to window
// at a time, retrying any that fail (leadership changes) on the next
// leader: the FSM is a set, so a command applied twice is harmless. ack,
// if not nil, is called with the highest id once every id up to it is
// acknowledged.
func (c *cluster) apply(from, to uint64, window int, ack func(uint64)) {
	deadline := time.Now().Add(60 * time.Second)
	for next := from; next <= to; {
		if time.Now().After(deadline) {
			c.fatalf("applying %d..%d: stuck at %d", from, to, next)
		}
		r := c.nodes[c.leader()].raft
		end := min(to, next+uint64(window)-1)
		futures := make([]raft.ApplyFuture, 0, window)
		for id := next; id <= end; id++ {
			futures = append(futures, r.Apply(command(id), 10*time.Second))
		}
		failed := false
		for _, f := range futures {
			if err := f.Error(); err != nil {
				failed = true
			} else if resp := f.Response(); resp != nil {
				c.fatalf("FSM: %v", resp)
			}
		}
		if failed {
			time.Sleep(20 * time.Millisecond)
			continue // the whole window again
		}
		if ack != nil {
			ack(end)
		}
		next = end + 1
	}
}

// settle waits until every running node has applied everything the
// leader has, and returns the leader's number.
func (c *cluster) settle() int {
	l := c.leader()
	lr := c.nodes[l].raft
	if err := lr.Barrier(30 * time.Second).Error(); err != nil {
		c.fatalf("barrier: %v", err)
	}
	want := lr.AppliedIndex()
	// The barrier has passed through the leader's FSM, so it holds every
	// command up to the barrier: the others must too. (Raft counts an
	// entry applied before the FSM's goroutine has applied it.)
	wantFSM := c.nodes[l].fsm.lastApplied()
	deadline := time.Now().Add(30 * time.Second)
	for i, n := range c.nodes {
		for n.raft != nil && (n.raft.AppliedIndex() < want || n.fsm.lastApplied() < wantFSM) {
			if time.Now().After(deadline) {
				c.fatalf("node %d applied %d (its FSM %d), leader %d (its FSM %d)", i, n.raft.AppliedIndex(), n.fsm.lastApplied(), want, wantFSM)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return l
}

// checkApplied checks raft's state machine safety on the running nodes,
// over everything they applied since the cluster object was made: no two
// applied different commands at the same log index. It returns the number
// of applications at an index another node applied too.
func (c *cluster) checkApplied() int {
	seen := map[uint64]uint64{}
	shared := 0
	for i, n := range c.nodes {
		if n.raft == nil {
			continue
		}
		n.fsm.mu.Lock()
		for idx, id := range n.fsm.at {
			if prev, ok := seen[idx]; !ok {
				seen[idx] = id
			} else if prev != id {
				n.fsm.mu.Unlock()
				c.fatalf("node %d applied command %d at index %d, another node %d", i, id, idx, prev)
			} else {
				shared++
			}
		}
		n.fsm.mu.Unlock()
	}
	return shared
}

// checkFSMs checks that every running node's FSM holds every id in
// [lo, hi] and no other: every acknowledged command is on every node.
func (c *cluster) checkFSMs(lo, hi uint64) {
	c.checkApplied()
	for i, n := range c.nodes {
		if n.raft == nil {
			continue
		}
		if n.fsm.bad != nil {
			c.fatalf("node %d: %v", i, n.fsm.bad)
		}
		ids := n.fsm.sorted()
		if uint64(len(ids)) != hi-lo+1 || ids[0] != lo || ids[len(ids)-1] != hi {
			missing := 0
			for id := lo; id <= hi; id++ {
				if _, ok := slices.BinarySearch(ids, id); !ok {
					missing++
				}
			}
			c.fatalf("node %d: %d ids in [%d, %d], want %d (%d missing)", i, len(ids), ids[0], ids[len(ids)-1], hi-lo+1, missing)
		}
	}
}

// checkLogs checks that the running nodes agree on the last index, stops
// the cluster, opens the nodes' files read-only and checks that they hold
// the same entry at every index past their last snapshots where more than
// one holds one. (At or below a snapshot a follower installed, its file
// may keep entries the cluster overwrote: raft never reads them again. A
// file's log may also end before raft's last index, which counts that
// snapshot.) It returns the number of indexes compared on all three.
func (c *cluster) checkLogs() int {
	var raftLast uint64
	var snapIdx [3]uint64
	for i, n := range c.nodes {
		if l := n.raft.LastIndex(); i > 0 && l != raftLast {
			c.fatalf("node %d's last index is %d, node 0's %d", i, l, raftLast)
		} else {
			raftLast = l
		}
		snapIdx[i] = c.lastSnapshotIndex(i)
	}
	c.stopAll()
	var lo, hi uint64
	var stores []*Store
	defer func() {
		for _, s := range stores {
			_ = s.Close()
		}
	}()
	for i, n := range c.nodes {
		s, err := New(Options{Path: n.store.Path(), RivetOptions: &rivet.Options{ReadOnly: true}})
		if err != nil {
			c.fatalf("node %d: %v", i, err)
		}
		stores = append(stores, s)
		first, err1 := s.FirstIndex()
		last, err2 := s.LastIndex()
		if err := errors.Join(err1, err2); err != nil {
			c.fatalf("node %d: %v", i, err)
		}
		if last > raftLast {
			c.fatalf("node %d's file ends at %d, past raft's last index %d", i, last, raftLast)
		}
		if i == 0 || first < lo {
			lo = first
		}
		hi = max(hi, last)
	}
	inAll := 0
	for i := max(lo, 1); i <= hi; i++ {
		var want *raft.Log
		held := 0
		for j, s := range stores {
			if i <= snapIdx[j] {
				continue
			}
			var got raft.Log
			if err := s.GetLog(i, &got); errors.Is(err, raft.ErrLogNotFound) {
				continue
			} else if err != nil {
				c.fatalf("node %d: entry %d: %v", j, i, err)
			}
			held++
			if want == nil {
				want = &got
			} else if got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) {
				c.fatalf("entry %d differs: node %d has %+v, another %+v", i, j, got, *want)
			}
		}
		if held == len(stores) {
			inAll++
		}
	}
	return inAll
}

// lastSnapshotIndex returns raft's last snapshot index of node i.
func (c *cluster) lastSnapshotIndex(i int) uint64 {
	var idx uint64
	_, _ = fmt.Sscan(c.nodes[i].raft.Stats()["last_snapshot_index"], &idx)
	return idx
}

// TestCluster runs a 3-node cluster over raftstore files: elect, apply
// 10,000 commands, take a snapshot and restore it through raft, stop a
// follower while the leader's log moves past it and restart it (it
// catches up by InstallSnapshot), restart the leader, and check that
// every node holds every command and the same log.
func TestCluster(t *testing.T) {
	start := time.Now()
	c := newCluster(t.TempDir(), t.Fatalf)
	defer func() {
		if t.Failed() {
			t.Logf("raft's log:\n%s", c.log.String())
		}
	}()
	defer c.stopAll()
	for i := range c.nodes {
		c.start(i)
	}
	l := c.leader()
	t.Logf("elected n%d in %v", l, time.Since(start).Round(time.Millisecond))

	c.apply(1, 4000, 256, nil)

	// A user snapshot, then its restore through raft (Raft.Restore: the
	// leader installs it and the followers take it by InstallSnapshot).
	l = c.leader()
	sf := c.nodes[l].raft.Snapshot()
	if err := sf.Error(); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := sf.Open()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) != 8+8*4000 {
		t.Fatalf("snapshot of %d bytes, want %d (the last index applied, 4,000 ids)", len(snap), 8+8*4000)
	}
	if err := c.nodes[l].raft.Restore(meta, bytes.NewReader(snap), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c.apply(4001, 6000, 256, nil)
	c.settle()
	c.checkFSMs(1, 6000)

	// Stop a follower; the leader snapshots and truncates its log past
	// the follower's last entry, so the follower catches up from a
	// snapshot when it comes back.
	f := (c.leader() + 1) % 3
	fLast, _ := c.nodes[f].store.LastIndex()
	c.stop(f)
	c.apply(6001, 8500, 256, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		first, _ := c.nodes[c.leader()].store.FirstIndex()
		if first > fLast+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader's log still starts at %d, follower stopped at %d", first, fLast)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.start(f)
	c.apply(8501, 9000, 256, nil)
	c.settle()
	if got := c.lastSnapshotIndex(f); got <= fLast {
		t.Fatalf("restarted follower's last snapshot %d, want past %d (an InstallSnapshot)", got, fLast)
	}
	c.checkFSMs(1, 9000)

	// Restart the leader: the others elect one of them, it rejoins.
	l = c.leader()
	c.stop(l)
	c.apply(9001, 9500, 256, nil)
	c.start(l)
	c.apply(9501, 10000, 256, nil)
	l = c.settle()
	c.checkFSMs(1, 10000)
	shared := c.checkApplied()
	last := c.nodes[l].raft.LastIndex()
	n := c.checkLogs()
	t.Logf("10,000 commands on 3 nodes (log at %d; %d applications at an index another node applied, same command; %d entries on all three files, equal) in %v",
		last, shared, n, time.Since(start).Round(time.Millisecond))
}
