package cloudprovider

// CapacityReservationIDLabel is on the template node of a node group whose
// nodes launch into reserved capacity that is paid for whether it runs a
// node or not (an AWS On-Demand Capacity Reservation or Capacity Block the
// group's launch template targets): the reservation's ID. Removing such a
// node saves nothing, so consolidation leaves the group's nodes alone.
const CapacityReservationIDLabel = "cluster-autoscaler.kubernetes.io/capacity-reservation-id"
