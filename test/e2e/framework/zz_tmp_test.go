package framework

import "testing"

func TestTmpKeep(t *testing.T) {
	cp := Start(t, Options{})
	t.Log(cp.Dir)
	t.Fail()
}
