package kwok

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Partitionable devices (KEP-4815): a driver's sharedCounters are counter
// sets each node's pool offers (say a GPU's memory and compute slices), and
// its devices may consume counters from them (consumesCounters: the whole
// GPU takes all, a 1g partition one slice and its memory), so allocating
// one partition leaves less for the others. The API server keeps counter
// sets and devices in separate ResourceSlices of one pool, so a driver with
// counters publishes two slices per node (see resourceSlices).

// validateCounters checks a driver's counter sets and what its devices
// consume from them: what the API server refuses (names, limits, a
// negative quantity), and what it accepts but no allocation could use (a
// device consuming a counter set or counter the driver does not share, or
// more than the set holds).
func validateCounters(d DriverDevices, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	sp := p.Child("sharedCounters")
	if len(d.SharedCounters) > resourceapi.ResourceSliceMaxCounterSets {
		errs = append(errs, field.TooMany(sp, len(d.SharedCounters), resourceapi.ResourceSliceMaxCounterSets))
	}
	sets := map[string]map[string]resource.Quantity{}
	for i, set := range d.SharedCounters {
		ip := sp.Index(i)
		for _, msg := range validation.IsDNS1123Label(set.Name) {
			errs = append(errs, field.Invalid(ip.Child("name"), set.Name, msg))
		}
		if _, dup := sets[set.Name]; dup {
			errs = append(errs, field.Duplicate(ip.Child("name"), set.Name))
		}
		errs = append(errs, validateCounterMap(set.Counters, ip.Child("counters"), resourceapi.ResourceSliceMaxCountersPerCounterSet)...)
		held := map[string]resource.Quantity{}
		for name, c := range set.Counters {
			held[name] = c.Value
		}
		sets[set.Name] = held
	}
	for j, dev := range d.Devices {
		cp := p.Child("devices").Index(j).Child("consumesCounters")
		if len(dev.ConsumesCounters) > resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice {
			errs = append(errs, field.TooMany(cp, len(dev.ConsumesCounters),
				resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice))
		}
		used := map[string]bool{}
		for k, c := range dev.ConsumesCounters {
			kp := cp.Index(k)
			if used[c.CounterSet] {
				errs = append(errs, field.Duplicate(kp.Child("counterSet"), c.CounterSet))
			}
			used[c.CounterSet] = true
			errs = append(errs, validateCounterMap(c.Counters, kp.Child("counters"),
				resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption)...)
			held, ok := sets[c.CounterSet]
			if !ok {
				errs = append(errs, field.NotFound(kp.Child("counterSet"),
					fmt.Sprintf("%s (not among driver %s's sharedCounters)", c.CounterSet, d.Driver)))
				continue
			}
			for name, want := range c.Counters {
				has, ok := held[name]
				switch {
				case !ok:
					errs = append(errs, field.NotFound(kp.Child("counters").Key(name),
						fmt.Sprintf("%s (counter set %s has no such counter)", name, c.CounterSet)))
				case want.Value.Cmp(has) > 0:
					errs = append(errs, field.Invalid(kp.Child("counters").Key(name), want.Value.String(),
						fmt.Sprintf("more than counter set %s holds (%s): the device could never be allocated", c.CounterSet, has.String())))
				}
			}
		}
	}
	return errs
}

// validateCounterMap checks one map of counters: between 1 and most of
// them, named by DNS labels, none negative.
func validateCounterMap(counters map[string]resourceapi.Counter, p *field.Path, most int) field.ErrorList {
	var errs field.ErrorList
	if len(counters) == 0 || len(counters) > most {
		errs = append(errs, field.Invalid(p, len(counters), fmt.Sprintf("want between 1 and %d counters", most)))
	}
	for name, c := range counters {
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(p.Key(name), name, msg))
		}
		if c.Value.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Key(name), c.Value.String(), "must not be negative"))
		}
	}
	return errs
}

// consumesCounters reports whether a device of d consumes counters, which
// lowers how many devices one slice may hold.
func consumesCounters(d DriverDevices) bool {
	for _, dev := range d.Devices {
		if len(dev.ConsumesCounters) > 0 {
			return true
		}
	}
	return false
}

// countersSlice is the slice of pool that carries d's counter sets, named
// after the devices' slice name; nil when d shares no counter.
func countersSlice(d DriverDevices, devices *resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
	if len(d.SharedCounters) == 0 {
		return nil
	}
	sl := devices.DeepCopy()
	sl.Name = devices.Name + "-counters"
	sl.Spec.Devices = nil
	sl.Spec.SharedCounters = make([]resourceapi.CounterSet, len(d.SharedCounters))
	for i := range d.SharedCounters {
		d.SharedCounters[i].DeepCopyInto(&sl.Spec.SharedCounters[i])
	}
	return sl
}
