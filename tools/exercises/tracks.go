package main

import (
	"fmt"
	"slices"
)

// The two tracks of the course. The fill-in track blanks a few statements
// per exercise; the build track blanks whole functions (the build tasks)
// and, outside them, the fill-in exercises too, so that a learner on it
// writes the core of each stage.
const (
	TrackFill  = "fill"
	TrackBuild = "build"
)

// parseTrack checks a -track value.
func parseTrack(v string) (string, error) {
	switch v {
	case TrackFill, TrackBuild:
		return v, nil
	case "":
		return TrackFill, nil
	}
	return "", fmt.Errorf("track %q: want %s or %s", v, TrackFill, TrackBuild)
}

// forTrack keeps the tasks a track blanks: the fill-in exercises, or the
// build tasks with the fill-in exercises that lie outside them.
func forTrack(exs []*Exercise, track string) []*Exercise {
	var kept []*Exercise
	for _, e := range exs {
		switch {
		case track == TrackFill && e.Kind == Fill,
			track == TrackBuild && e.Kind == Build,
			track == TrackBuild && e.Kind == Fill && !insideBuild(e, exs):
			kept = append(kept, e)
		}
	}
	return kept
}

// onlyIDs keeps the tasks named (all when ids is empty); it fails on an id
// that is not among them.
func onlyIDs(exs []*Exercise, ids []string) ([]*Exercise, error) {
	if len(ids) == 0 {
		return exs, nil
	}
	var kept []*Exercise
	for _, id := range ids {
		i := slices.IndexFunc(exs, func(e *Exercise) bool { return e.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("no task %s here (go run ./tools/exercises list shows them; in a learner's copy, a task inside code you write is gone with it)", id)
		}
		kept = append(kept, exs[i])
	}
	return kept, nil
}
