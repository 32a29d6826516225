// Command crashopen measures how long Open takes after a process crash:
// it loads a database once, then, round after round, copies it, runs a
// child process that commits random updates to the copy in Full
// durability (through the commit journal), kills the child with SIGKILL
// after a random time, and times Open of what it left, which replays the
// journal written since the last checkpoint (docs/design.md §3.8). The
// page cache keeps what the child wrote, as after a crash of the process
// (not of the machine).
//
// Usage:
//
//	go run ./cmd/crashopen                      # 1M keys, 100-key commits, 30 rounds
//	go run ./cmd/crashopen -per 1 -rounds 10    # one-key commits
//	go run ./cmd/crashopen -cpuprofile /tmp/open.prof && go tool pprof /tmp/open.prof.*
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/rivetkv/rivet"
)

func main() {
	keys := flag.Int("keys", 1_000_000, "keys loaded (16-byte keys, values of -value bytes)")
	value := flag.Int("value", 100, "value size in bytes")
	per := flag.Int("per", 100, "random keys updated per commit")
	rounds := flag.Int("rounds", 30, "kills")
	minRun := flag.Duration("min", time.Second, "shortest run of the child before its kill")
	maxRun := flag.Duration("max", 3*time.Second, "longest run of the child before its kill")
	dir := flag.String("dir", os.TempDir(), "directory for the database files")
	child := flag.String("child", "", "internal: run as the child on this file")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of each Open after a kill to this path plus the round's number (go tool pprof merges them)")
	flag.Parse()
	if *child != "" {
		runChild(*child, *keys, *value, *per)
		return
	}
	if *maxRun < *minRun {
		fail(fmt.Errorf("-max %v is below -min %v", *maxRun, *minRun))
	}
	work, err := os.MkdirTemp(*dir, "crashopen-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(work)
	template := filepath.Join(work, "template.db")
	if err := load(template, *keys, *value); err != nil {
		fail(err)
	}
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	fmt.Printf("%d keys of %d bytes, %d-key commits, kills after %v-%v\n", *keys, *value, *per, *minRun, *maxRun)
	var opens []time.Duration
	for round := range *rounds {
		path := filepath.Join(work, "db")
		for _, name := range []string{path, path + "-journal-0", path + "-journal-1"} {
			if err := os.Remove(name); err != nil && !os.IsNotExist(err) {
				fail(err)
			}
		}
		if err := copyFile(template, path); err != nil {
			fail(err)
		}
		cmd := exec.Command(self, "-child", path, "-keys", fmt.Sprint(*keys), "-value", fmt.Sprint(*value), "-per", fmt.Sprint(*per))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			fail(err)
		}
		if err := cmd.Start(); err != nil {
			fail(err)
		}
		// The child says when it has opened the file and starts committing.
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			fail(fmt.Errorf("child: %w", err))
		}
		time.Sleep(*minRun + rand.N(*maxRun-*minRun+1))
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		journal := int64(0)
		for i := range 2 {
			if st, err := os.Stat(fmt.Sprintf("%s-journal-%d", path, i)); err == nil {
				journal += st.Size()
			}
		}
		var profile *os.File
		if *cpuProfile != "" {
			if profile, err = os.Create(fmt.Sprintf("%s.%d", *cpuProfile, round)); err != nil {
				fail(err)
			}
			if err := pprof.StartCPUProfile(profile); err != nil {
				fail(err)
			}
		}
		start := time.Now()
		db, err := rivet.Open(path, 0o600, nil)
		took := time.Since(start)
		if profile != nil {
			pprof.StopCPUProfile()
			if err := profile.Close(); err != nil {
				fail(err)
			}
		}
		if err != nil {
			fail(fmt.Errorf("round %d: open after the kill: %w", round, err))
		}
		rec := db.Recovery()
		if err := db.Close(); err != nil {
			fail(err)
		}
		opens = append(opens, took)
		fmt.Printf("round %d: Open %v, journal files %d KiB, %d journal records applied, %d pages verified\n", round, took.Round(10*time.Microsecond), journal>>10, rec.JournalRecords, rec.PagesVerified)
	}
	slices.Sort(opens)
	fmt.Printf("Open after a kill: %d rounds, median %v, worst %v\n", len(opens), opens[len(opens)/2].Round(10*time.Microsecond), opens[len(opens)-1].Round(10*time.Microsecond))
}

// load makes the template database: keys in order, 10,000 a commit.
func load(path string, keys, value int) error {
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	v := make([]byte, value)
	for start := 0; start < keys; start += 10_000 {
		err := db.Update(func(tx *rivet.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for i := start; i < min(start+10_000, keys); i++ {
				if err := b.Put(key(uint64(i)), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			_ = db.Close()
			return err
		}
	}
	return db.Close()
}

// runChild commits random updates to path until it is killed.
func runChild(path string, keys, value, per int) {
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		fail(err)
	}
	v := make([]byte, value)
	fmt.Println("committing")
	for {
		err := db.Update(func(tx *rivet.Tx) error {
			b := tx.Bucket([]byte("b"))
			for range per {
				if err := b.Put(key(rand.Uint64N(uint64(keys))), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			fail(err)
		}
	}
}

func key(i uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 8, 16), i) }

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "crashopen:", err)
	os.Exit(1)
}
