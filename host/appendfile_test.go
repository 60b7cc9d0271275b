package host

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "session.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// appendNoCarry appends with no carry: lines landing first refuse it.
func appendNoCarry(t *testing.T, st FileState, block []byte, timeout time.Duration) (Appended, error) {
	t.Helper()
	res, err := AppendCarrying(st, block, nil, timeout)
	if err == nil {
		assert.Equal(t, OutcomeAppended, res.Outcome)
		assert.Equal(t, 1, res.Appends)
	}
	return res.Undo, err
}

func TestAppendAndUndo(t *testing.T) {
	const before = "{\"a\":1}\n{\"b\":2}\n"
	path := writeTemp(t, before)
	data, st, err := ReadFileState(path, 0)
	require.NoError(t, err)
	assert.Equal(t, before, string(data))
	assert.Equal(t, sha256.Sum256(data), st.SHA256)

	block := []byte("{\"c\":3}\n{\"d\":4}\n")
	ap, err := appendNoCarry(t, st, block, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(len(before)), ap.Offset)
	assert.Equal(t, AppendedTo(st.SHA256, st.Size, block), ap)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before+string(block), string(got))

	// The same read cannot append twice: the file is no longer what
	// was read.
	_, err = appendNoCarry(t, st, block, 0)
	assert.ErrorIs(t, err, ErrLogChanged)

	require.NoError(t, TruncateIfUnchanged(path, ap, 0))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, string(got), "undo restores the file byte for byte")
	// Twice is refused: the block is gone.
	assert.ErrorIs(t, TruncateIfUnchanged(path, ap, 0), ErrLogChanged)
}

func TestAppendRefusesAChangedFile(t *testing.T) {
	const before = "{\"a\":1}\n"
	for name, change := range map[string]func(path string){
		"grown": func(path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("{\"agent\":true}\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		},
		"touched": func(path string) {
			later := time.Now().Add(time.Hour)
			require.NoError(t, os.Chtimes(path, later, later))
		},
		"replaced": func(path string) {
			tmp := path + ".new"
			require.NoError(t, os.WriteFile(tmp, []byte(before), 0o644))
			require.NoError(t, os.Rename(tmp, path))
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeTemp(t, before)
			_, st, err := ReadFileState(path, 0)
			require.NoError(t, err)
			change(path)
			now, err := os.ReadFile(path)
			require.NoError(t, err)
			_, err = appendNoCarry(t, st, []byte("{\"ours\":1}\n"), 0)
			require.ErrorIs(t, err, ErrLogChanged)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "close the agent")
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(now), string(after), "nothing was written")
		})
	}
}

func TestTruncateIfUnchangedRefuses(t *testing.T) {
	const before = "{\"a\":1}\n"
	block := []byte("{\"ours\":1}\n")
	for name, tc := range map[string]struct {
		change func(path string)
		says   string
	}{
		"the agent went on": {func(path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("{\"agent\":2}\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "written after the compaction"},
		"the prefix was edited": {func(path string) {
			require.NoError(t, os.WriteFile(path, []byte("{\"A\":1}\n"+string(block)), 0o644))
		}, "differ"},
		"shortened": {func(path string) {
			require.NoError(t, os.WriteFile(path, []byte(before), 0o644))
		}, "shorter"},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeTemp(t, before)
			_, st, err := ReadFileState(path, 0)
			require.NoError(t, err)
			ap, err := appendNoCarry(t, st, block, 0)
			require.NoError(t, err)
			tc.change(path)
			now, err := os.ReadFile(path)
			require.NoError(t, err)
			err = TruncateIfUnchanged(path, ap, 0)
			require.ErrorIs(t, err, ErrLogChanged)
			assert.Contains(t, err.Error(), tc.says)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(now), string(after), "nothing was changed")
		})
	}
}

func TestReadFileStateLimits(t *testing.T) {
	path := writeTemp(t, "{\"a\":1}\n")
	_, _, err := ReadFileState(path, 3)
	assert.ErrorIs(t, err, ErrSessionTooLarge)
	_, _, err = ReadFileState(t.TempDir(), 0)
	assert.Error(t, err)
}

// agentAppend appends s as an agent does: on its own O_APPEND descriptor,
// without the lock.
func agentAppend(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// carryOnce carries the tail's first run when it is the agent's, with
// the bytes carried(first run) returns; once something of ours follows
// the block, nothing more. It records every tail it is given.
type carryOnce struct {
	tails   [][]Landed
	carried func(first []byte) []byte
	err     error
	before  func() // runs at each call, before deciding
}

func (c *carryOnce) carry(tail []Landed) ([]byte, error) {
	c.tails = append(c.tails, slices.Clone(tail))
	if c.before != nil {
		c.before()
	}
	if c.err != nil {
		return nil, c.err
	}
	ours := 0
	for _, l := range tail {
		if l.Ours {
			ours++
		}
	}
	if tail[0].Ours || ours > 1 {
		return nil, nil
	}
	return c.carried(tail[0].Data), nil
}

func carriedCopy(first []byte) []byte {
	return []byte("{\"carried\":" + strconv.Quote(string(first)) + "}\n")
}

// Lines an agent appends after the read and before the block are unseen
// by it: carry is given them and the block, what it returns goes after
// the block, and undo takes the block and the carried copy away, leaving
// the agent's lines.
func TestAppendCarriesLinesThatLandedFirst(t *testing.T) {
	const before, agent = "{\"a\":1}\n", "{\"agent\":1}\n{\"agent\":2}\n"
	path := writeTemp(t, before)
	_, st, err := ReadFileState(path, 0)
	require.NoError(t, err)
	agentAppend(t, path, agent)
	block := []byte("{\"ours\":1}\n")
	c := &carryOnce{carried: carriedCopy}
	res, err := AppendCarrying(st, block, c.carry, 0)
	require.NoError(t, err)

	require.NotEmpty(t, c.tails)
	assert.Equal(t, []Landed{{Data: []byte(agent), Unseen: true}, {Data: block, Ours: true}}, c.tails[0], "the agent's lines, unseen, then the block")
	carried := carriedCopy([]byte(agent))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before+agent+string(block)+string(carried), string(got))
	assert.Equal(t, OutcomeCarried, res.Outcome)
	assert.Equal(t, 2, res.AgentLines)
	assert.Equal(t, 2, res.Appends)
	assert.EqualValues(t, len(carried), res.CarriedBytes)
	assert.Equal(t, AppendedTo(sha256.Sum256([]byte(before+agent)), int64(len(before+agent)), append(slices.Clone(block), carried...)), res.Undo)

	require.NoError(t, TruncateIfUnchanged(path, res.Undo, 0))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before+agent, string(got), "undo keeps the agent's lines")
}

// Lines that cannot be carried roll the block back: only our bytes are
// cut, the agent's lines stay, and the error says what happened.
func TestAppendRollsBackWhatCannotBeCarried(t *testing.T) {
	const before, agent = "{\"a\":1}\n", "{\"agent\":1}\n"
	path := writeTemp(t, before)
	_, st, err := ReadFileState(path, 0)
	require.NoError(t, err)
	agentAppend(t, path, agent)
	c := &carryOnce{err: errors.New("the agent compacted meanwhile")}
	res, err := AppendCarrying(st, []byte("{\"ours\":1}\n"), c.carry, 0)
	require.ErrorIs(t, err, ErrLogChanged)
	assert.Contains(t, err.Error(), "the agent compacted meanwhile")
	assert.Contains(t, err.Error(), "taken back")
	assert.Equal(t, OutcomeRolledBack, res.Outcome)
	assert.Equal(t, 1, res.AgentLines)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before+agent, string(got))
}

// When the agent also wrote after the block, the block cannot be cut
// away without its lines: it stays, and the error says where.
func TestAppendLeavesABlockTheAgentWroteAfter(t *testing.T) {
	const before, agent, later = "{\"a\":1}\n", "{\"agent\":1}\n", "{\"agent\":2}\n"
	path := writeTemp(t, before)
	_, st, err := ReadFileState(path, 0)
	require.NoError(t, err)
	agentAppend(t, path, agent)
	block := []byte("{\"ours\":1}\n")
	c := &carryOnce{err: errors.New("no way to carry"), before: func() { agentAppend(t, path, later) }}
	res, err := AppendCarrying(st, block, c.carry, 0)
	require.ErrorIs(t, err, ErrLogChanged)
	assert.Equal(t, OutcomeUnresolved, res.Outcome)
	assert.Contains(t, err.Error(), fmt.Sprintf("left at offset %d", len(before+agent)))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before+agent+string(block)+later, string(got), "nothing the agent wrote was cut")
}

// A line the agent writes while the carry is made is read before the
// carry is appended, and the carry is made again with it; since it
// follows the block, undo of the block would lose it and is refused.
func TestAppendRebuildsTheCarryForLinesThatLandMeanwhile(t *testing.T) {
	const before, agent, later = "{\"a\":1}\n", "{\"agent\":1}\n", "{\"agent\":2}\n"
	path := writeTemp(t, before)
	_, st, err := ReadFileState(path, 0)
	require.NoError(t, err)
	agentAppend(t, path, agent)
	block := []byte("{\"ours\":1}\n")
	wrote := false
	c := &carryOnce{carried: carriedCopy}
	c.before = func() {
		if !wrote {
			wrote = true
			agentAppend(t, path, later)
		}
	}
	res, err := AppendCarrying(st, block, c.carry, 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(c.tails), 2)
	assert.Equal(t, []Landed{{Data: []byte(agent), Unseen: true}, {Data: block, Ours: true}, {Data: []byte(later)}}, c.tails[1], "the line written meanwhile is read, and seen")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before+agent+string(block)+later+string(carriedCopy([]byte(agent))), string(got))
	assert.Equal(t, OutcomeCarried, res.Outcome)
	assert.Equal(t, 1, res.AgentLines, "only the line before the block was unseen")
	err = TruncateIfUnchanged(path, res.Undo, 0)
	require.ErrorIs(t, err, ErrLogChanged)
	assert.Contains(t, err.Error(), "written after the compaction")
}

// A line the agent has not finished is waited for, then refused: an
// append after half a line would join ours to it.
func TestAppendWaitsForAnIncompleteLine(t *testing.T) {
	const before = "{\"a\":1}\n"
	path := writeTemp(t, before)
	_, st, err := ReadFileState(path, 0)
	require.NoError(t, err)
	agentAppend(t, path, "{\"agent\":")
	_, err = AppendCarrying(st, []byte("{\"ours\":1}\n"), (&carryOnce{carried: carriedCopy}).carry, 0)
	require.ErrorIs(t, err, ErrLogChanged)
	assert.Contains(t, err.Error(), "incomplete")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before+"{\"agent\":", string(got), "nothing was written")
}
