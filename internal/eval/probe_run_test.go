package eval

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/abi"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProbesCorpus runs the committed probes over the corpus with the
// structured strategy, offline, in process, and reports the score. It
// asserts that the score is computed, not a target: every point got a
// summary, and the same probes scored against an empty summary fail.
func TestProbesCorpus(t *testing.T) {
	corpus(t)
	rep, err := RunProbes(ctx, ProbeOptions{Probes: filepath.Join("testdata", "probes"), InProcess: true})
	require.NoError(t, err)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Logf("\n%s", table.String())

	require.NotEmpty(t, rep.Points)
	for _, p := range rep.Points {
		assert.Empty(t, p.Err, "%s at %d", p.Session, p.At)
		if p.NotCompacted {
			assert.LessOrEqual(t, p.At, 2, "%s at %d: only a point at the first messages can hold a single one", p.Session, p.At)
			continue
		}
		assert.Positive(t, p.Folded, "%s at %d folded nothing", p.Session, p.At)
	}
	assert.Positive(t, rep.Total.Answered, "no probe answered by any summary")

	sets, err := LoadProbes(filepath.Join("testdata", "probes"))
	require.NoError(t, err)
	empty := &ProbeReport{}
	for _, s := range sets {
		for pi := range s.Points {
			empty.Points = append(empty.Points, scorePoint(ProbePointScore{Session: s.Session}, &s.Points[pi], ""))
		}
	}
	empty.tally()
	assert.Equal(t, rep.Total.Probes, empty.Total.Probes)
	assert.Zero(t, empty.Total.Answered, "an empty summary answers nothing")
	assert.Greater(t, rep.Total.Answered, empty.Total.Answered)
}

// TestProbesAnsweredByTheFoldedMessages checks the ground truth of the
// committed probes: the messages before each point, unsummarized, answer
// every probe of the point. A probe they do not answer asks for something
// the session had not shown yet, or its matcher has a typo.
func TestProbesAnsweredByTheFoldedMessages(t *testing.T) {
	corpus(t)
	sets, err := LoadProbes(filepath.Join("testdata", "probes"))
	require.NoError(t, err)
	for _, set := range sets {
		path, err := probeSession(set, nil)
		require.NoError(t, err)
		sess, _, err := loadSession(path)
		require.NoError(t, err)
		require.NoError(t, set.Resolve(sess.Messages))
		for _, p := range set.Points {
			var folded []abi.Message
			for _, m := range sess.Messages[:p.At] {
				if !m.Pinned {
					folded = append(folded, m)
				}
			}
			text := ContextText(folded)
			norm, plain := normalize(text), foldProbe(text)
			for _, q := range p.Probes {
				assert.True(t, q.answered(norm, plain), "%s @%d %s/%s: the messages before the point do not answer it", set.Session, p.At, p.ID, q.ID)
			}
		}
	}
}
