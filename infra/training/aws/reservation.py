"""How a run launches into an On-Demand Capacity Reservation (pure, no pulumi).

EC2 Fleet takes no reservation id for on-demand capacity: with `use-capacity-reservations-first` it
uses *open* reservations that match, or *targeted* ones only through a Capacity Reservation resource
group named in the launch template ("Use Capacity Reservations in EC2 Fleet", EC2 User Guide; the
same lesson in aws-parallelcluster PR #5862). A launch template that names the reservation id itself
makes CreateFleet launch nothing. So an `odcr` run creates a group of its own holding the reservation
and points the launch template at the group's ARN. A Capacity Block is different: its launch template
names the block's reservation id, with market type `capacity-block`.
"""

from __future__ import annotations

# The group configuration a launch may target ("Create a Capacity Reservation group", EC2 User Guide,
# read 2026-11-27): the pool type makes it targetable, the generic type admits reservations only.
POOL_CONFIGURATION: tuple[tuple[str, dict[str, tuple[str, ...]]], ...] = (
    ("AWS::EC2::CapacityReservationPool", {}),
    ("AWS::ResourceGroups::Generic", {"allowed-resource-types": ("AWS::EC2::CapacityReservation",)}),
)


def capacity_reservation_arn(partition: str, region: str, account: str, reservation_id: str) -> str:
    """The ARN a resource group member is named by (Service Authorization Reference, Amazon EC2:
    capacity-reservation resource type)."""
    return f"arn:{partition}:ec2:{region}:{account}:capacity-reservation/{reservation_id}"
