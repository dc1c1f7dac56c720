package lease

import "fmt"

// CheckBatch is the first phase of a driver's TryAcquireBatch: it checks
// each request with check and refuses a key named twice. It returns the
// results with the refusals filled in and the indexes of the requests
// that go to the store, in the order of reqs.
func CheckBatch(reqs []Request, check func(Request) error) (out []Result, valid []int) {
	out = make([]Result, len(reqs))
	seen := make(map[string]bool, len(reqs))
	for i, r := range reqs {
		if err := check(r); err != nil {
			out[i].Err = err
			continue
		}
		if seen[r.Key] {
			out[i].Err = fmt.Errorf("acquire %s: key twice in one batch", r.Key)
			continue
		}
		seen[r.Key] = true
		valid = append(valid, i)
	}
	return out, valid
}
