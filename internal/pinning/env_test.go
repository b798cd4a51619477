package pinning_test

import (
	"testing"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/pinning"
)

// The starter reads the variables the planner's decisions set.
func TestEnvNamesMatchPlan(t *testing.T) {
	if pinning.EnvExclusiveCPUs != plan.EnvExclusiveCPUs || pinning.EnvSharedCPUs != plan.EnvSharedCPUs {
		t.Errorf("pinning reads %s and %s, plan sets %s and %s",
			pinning.EnvExclusiveCPUs, pinning.EnvSharedCPUs, plan.EnvExclusiveCPUs, plan.EnvSharedCPUs)
	}
}
