package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rivetkv/rivet/testing/hostile"
)

// hostileCheck times each engine's Check on files whose trees share
// subtrees or form cycles (bbolt #877: bbolt's Check ran for 30 minutes on
// a damaged file). The engine writes hostileCheckKeys keys into its
// bucket; the bucket's tree is then rewritten, from its own pages, into
// each of hostile.Shapes, hostileCheckLevels deep (rivet's file by
// testing/hostile, every checksum re-sealed; bbolt's by damageBbolt,
// bbolt having no page checksums), and the engine's Check runs on it in a
// child process stopped after --duration: a check that never ends or
// crashes its process (on bbolt, a cycle is a stack overflow, fatal and not
// a panic) is reported, not waited for. Run it with --duration 60s --runs 1
// for the documented figures: a check that does not finish takes the whole
// deadline every run.
var hostileCheck = Workload{
	Name:          "hostile-check",
	Summary:       "bbolt #877: Check on files whose bucket tree is a 20-level DAG or cycle (branches or nested buckets), in a child process stopped after --duration: finished or not, time, problems reported",
	Run:           runHostileCheck,
	OnlyWhenNamed: true,
}

var _ = registerChild("check", checkChild)

// checkTimeFigure names the check's time; a check stopped at the deadline
// or crashed counts the time until then, a lower bound.
const checkTimeFigure = "check time (until stopped or crashed)"

// Shape of the damaged files.
const (
	hostileCheckKeys   = 20_000
	hostileCheckLevels = 20
)

func runHostileCheck(ctx context.Context, env *Env) error {
	if _, ok := env.Engine.(Inspector); !ok {
		return nil // no Check to run (LMDB)
	}
	const name = "hostile.db"
	db, err := env.Open(name)
	if err != nil {
		return err
	}
	err = load(ctx, db, sequence(hostileCheckKeys), env.Progress("load", hostileCheckKeys))
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	clean, err := os.ReadFile(env.Path(name))
	if err != nil {
		return err
	}
	var damage func(img []byte, shape hostile.Shape) error
	switch {
	case rivetEngine{}.Detect(clean):
		damage = func(img []byte, shape hostile.Shape) error {
			_, err := hostile.Build(img, string(BucketName), shape, hostileCheckLevels, false)
			return err
		}
	case boltEngine{}.Detect(clean):
		damage = func(img []byte, shape hostile.Shape) error {
			return damageBbolt(img, string(BucketName), shape, hostileCheckLevels)
		}
	default:
		return nil // a format this workload cannot damage
	}
	for _, shape := range hostile.Shapes {
		if err := ctx.Err(); err != nil {
			return err
		}
		img := append([]byte(nil), clean...)
		if err := damage(img, shape); err != nil {
			return fmt.Errorf("damaging the file into a %s: %w", shape, err)
		}
		path := env.Path("damaged.db")
		if err := os.WriteFile(path, img, 0o600); err != nil {
			return err
		}
		pre := string(shape) + ": "
		p := env.Progress(pre+"check", 1)
		start := time.Now()
		res, err := runChild(ctx, "check", map[string]string{"engine": env.Engine.Name(), "path": path}, env.Config.Duration)
		wall := time.Since(start)
		p.Add(1)
		p.Done()
		var ce *childError
		switch {
		case errors.As(err, &ce) && ce.TimedOut:
			env.Note(fmt.Sprintf("%s: Check did not finish in %s (stopped)", shape, env.Config.Duration))
			env.Scalar(pre+"check finished", UnitCount, Higher, 0)
			env.Scalar(pre+checkTimeFigure, UnitDuration, Lower, float64(wall))
		case errors.As(err, &ce):
			why := ce.Crash()
			if why == "" {
				why = strings.TrimSpace(ce.Error())
			}
			env.Note(fmt.Sprintf("%s: the checking process died after %s: %s", shape, wall.Round(time.Millisecond), why))
			env.Scalar(pre+"check finished", UnitCount, Higher, 0)
			env.Scalar(pre+checkTimeFigure, UnitDuration, Lower, float64(wall))
		case err != nil:
			return err
		default:
			env.Scalar(pre+"check finished", UnitCount, Higher, 1)
			env.Scalar(pre+checkTimeFigure, UnitDuration, Lower, res.Figures["time"])
			env.Scalar(pre+"problems reported", UnitCount, Neither, res.Figures["problems"])
			env.Scalar(pre+"peak RSS of the checking process", UnitBytes, Lower, float64(res.PeakRSS))
		}
		env.Scalar(pre+"file size", UnitBytes, Neither, float64(len(img)))
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	return nil
}

// checkChild runs the engine's Check on args["path"] and reports how many
// problems it found and how long it took.
func checkChild(args map[string]string) (childResult, error) {
	e, err := LookupEngine(args["engine"])
	if err != nil {
		return childResult{}, err
	}
	ins, ok := e.(Inspector)
	if !ok {
		return childResult{}, fmt.Errorf("engine %s has no Check", e.Name())
	}
	start := time.Now()
	n, err := ins.Check(args["path"], func(error) {})
	elapsed := time.Since(start)
	if err != nil {
		// The file did not open or the check could not run: that is a
		// finding about the file too, counted as one problem.
		n = 1
	}
	return childResult{Figures: map[string]float64{"time": float64(elapsed), "problems": float64(n)}}, nil
}
