package synthetic

import "context"

// StepRows is a step over the listed to-do rows only, due or not (Step takes the due
// ones): a test can give one step the rows it wants while the instances' workers run.
func (u *Upkeep) StepRows(ctx context.Context, ids []int64) (bool, error) {
	return u.stepSplit(ctx, ids)
}
