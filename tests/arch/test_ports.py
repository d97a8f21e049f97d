"""The port contract (:mod:`fcircnn.arch.ports`): which port carries which read, and the
rules for splitting a weight tile or an input box over both ports."""

import itertools

import pytest

from fcircnn.arch.ports import (
    ALL_READS,
    INPUT_HALF_READS,
    INPUT_QUARTER_KINDS,
    INPUT_READS,
    LOADER_READS,
    READ_KINDS,
    RESIDUAL_READS,
    SPLIT_INPUT_READS,
    SPLIT_WEIGHT_READS,
    WEIGHT_HALF_READS,
    WEIGHT_QUARTER_READS,
    WEIGHT_READS,
    PortMap,
    input_halves,
    input_quarters,
    weight_halves,
    weight_quarters,
)


def test_one_port_carries_everything_with_one_loader():
    ports = PortMap(1)
    assert (ports.weights, ports.weight_loader, ports.managers) == (0, False, ("m_axi",))
    assert ports.loader_reads(32) == (ALL_READS,)
    assert not ports.splits_weights(32)  # nothing to split over


def test_two_ports_give_the_weights_a_loader_and_split_even_tiles():
    ports = PortMap(2)
    assert (ports.weights, ports.weight_loader) == (1, True)
    assert ports.managers == ("m_axi", "m_axi1")
    assert ports.loader_reads(1) == (INPUT_READS, WEIGHT_READS)  # 1 beat a tap: no split
    assert ports.loader_reads(2) == (SPLIT_INPUT_READS, WEIGHT_READS)
    assert [ports.splits_weights(n) for n in (1, 2, 3, 4, 32)] == [False, True, False, True,
                                                                   True]


def test_two_ports_split_input_boxes_of_an_even_number_of_slot_groups():
    ports = PortMap(2)
    assert [ports.splits_inputs(g) for g in (1, 2, 3, 4, 8)] == [False, True, False, True, True]
    assert ports.loader_reads(1, 4) == (INPUT_READS, SPLIT_WEIGHT_READS)
    assert ports.loader_reads(2, 2) == (SPLIT_INPUT_READS, SPLIT_WEIGHT_READS)
    assert ports.loader_reads(2, 1) == (SPLIT_INPUT_READS, WEIGHT_READS)
    assert not PortMap(1).splits_inputs(4) and PortMap(1).loader_reads(2, 4) == (ALL_READS,)


def test_the_read_kinds_are_partitioned_between_the_loaders():
    assert ALL_READS | {"weight_half", "input_half", "weight_quarter1",
                        "weight_quarter3"} | INPUT_QUARTER_KINDS == set(READ_KINDS)
    assert INPUT_READS | WEIGHT_READS == ALL_READS and not INPUT_READS & WEIGHT_READS
    assert SPLIT_INPUT_READS - INPUT_READS == {"weight_half"}
    assert SPLIT_WEIGHT_READS - WEIGHT_READS == {"input_half"}
    assert not SPLIT_INPUT_READS & SPLIT_WEIGHT_READS
    assert len(set(LOADER_READS)) == len(LOADER_READS) == 19
    assert INPUT_HALF_READS == {"input_half"} and WEIGHT_HALF_READS == {"weight_half"}
    assert WEIGHT_QUARTER_READS == {"weight_quarter3"}


def test_four_ports_read_weight_tiles_in_quarters_where_the_beats_divide():
    ports = PortMap(4)
    assert ports.quarters_weights(8) and ports.quarters_weights(32)
    assert not ports.quarters_weights(2) and not ports.quarters_weights(6)
    assert not any(PortMap(n).quarters_weights(8) for n in (1, 2, 3))
    # port 0 the second quarter after its input box, port 2 the fourth (after the upper input
    # half where the boxes split), ports 1 and 3 the first and third as their weights/half
    assert ports.loader_reads(8, 2) == (INPUT_READS | {"weight_quarter1"}, WEIGHT_READS,
                                        INPUT_HALF_READS | WEIGHT_QUARTER_READS,
                                        WEIGHT_HALF_READS)
    assert ports.loader_reads(8, 1)[2] == WEIGHT_QUARTER_READS
    assert all(r in LOADER_READS for g in (1, 2) for r in ports.loader_reads(8, g))
    assert weight_quarters(8) == (range(0, 2), range(2, 4), range(4, 6), range(6, 8))
    # the first two quarters are the first half, the last two the second
    assert weight_halves(8) == (range(0, 4), range(4, 8))
    for bad in (2, 6, 0, True, 4.0):
        with pytest.raises(ValueError, match="multiple of four beats per tap"):
            weight_quarters(bad)


def test_three_ports_give_the_input_halves_a_loader_of_their_own():
    ports = PortMap(3)
    assert ports.managers == ("m_axi", "m_axi1", "m_axi2") and ports.pool_lanes == 3
    assert (ports.input_half, ports.weight_half) == (2, 0)
    assert ports.loader_reads(2, 2) == (SPLIT_INPUT_READS, WEIGHT_READS, INPUT_HALF_READS)
    # a core whose boxes do not split: no loader on port 2
    assert ports.loader_reads(2, 1) == (SPLIT_INPUT_READS, WEIGHT_READS, frozenset())


def test_four_ports_give_both_halves_loaders_of_their_own():
    ports = PortMap(4)
    assert ports.managers == ("m_axi", "m_axi1", "m_axi2", "m_axi3") and ports.pool_lanes == 4
    assert (ports.input_half, ports.weight_half) == (2, 3)
    assert ports.loader_reads(2, 2) == (INPUT_READS, WEIGHT_READS, INPUT_HALF_READS,
                                        WEIGHT_HALF_READS)
    assert ports.loader_reads(1, 1) == (INPUT_READS, WEIGHT_READS, frozenset(), frozenset())
    # every read kind on exactly one loader
    for beats, groups, residual in itertools.product((1, 2, 8), (1, 2), (False, True)):
        loaders = ports.loader_reads(beats, groups, residual=residual)
        assert sum(len(r) for r in loaders) == len(frozenset().union(*loaders))
        assert all(r in LOADER_READS for r in loaders if r)


def test_four_ports_read_the_residual_boxes_on_port_3():
    assert [PortMap(n).residual for n in (1, 2, 3, 4)] == [0, 0, 0, 3]
    ports = PortMap(4)
    no_res = INPUT_READS - RESIDUAL_READS
    assert ports.loader_reads(2, 2, residual=True) == (
        no_res, WEIGHT_READS, INPUT_HALF_READS, WEIGHT_HALF_READS | RESIDUAL_READS)
    # a core that splits nothing still gets a loader on port 3, for its residual boxes
    assert ports.loader_reads(1, 1, residual=True) == (no_res, WEIGHT_READS, frozenset(),
                                                       RESIDUAL_READS)
    assert ports.loader_reads(8, 2, residual=True)[0] == no_res | {"weight_quarter1"}
    # fewer ports: the input loader keeps them
    for n in (1, 2, 3):
        loaders = PortMap(n).loader_reads(2, 2, residual=True)
        assert "residual" in loaders[0] and not any("residual" in r for r in loaders[1:])


def test_input_halves_are_the_lower_and_upper_slot_groups():
    assert input_halves(2) == (range(0, 1), range(1, 2))
    assert input_halves(4) == (range(0, 2), range(2, 4))


@pytest.mark.parametrize("groups", [0, 1, 3, 2.0, True])
def test_input_halves_need_an_even_count(groups):
    with pytest.raises(ValueError, match="even number of slot groups"):
        input_halves(groups)


def test_weight_halves_are_the_first_and_second_half_of_a_tap():
    assert weight_halves(2) == (range(0, 1), range(1, 2))
    assert weight_halves(32) == (range(0, 16), range(16, 32))


@pytest.mark.parametrize("beats", [0, 1, 3, 2.0, True])
def test_weight_halves_need_an_even_count(beats):
    with pytest.raises(ValueError, match="even number of beats per tap"):
        weight_halves(beats)


@pytest.mark.parametrize("n", [0, 5, "2", None, 2.0])
def test_other_port_counts_are_refused_with_the_allowed_values(n):
    with pytest.raises(ValueError, match="axi_ports must be one of 1, 2, 3, 4"):
        PortMap(n)


def test_four_ports_read_input_boxes_in_quarters_where_the_groups_divide():
    ports = PortMap(4)
    assert ports.quarters_inputs(4) and ports.quarters_inputs(8)
    assert not ports.quarters_inputs(2) and not ports.quarters_inputs(6)
    assert not any(PortMap(n).quarters_inputs(4) for n in (1, 2, 3))
    # the second quarter on the weight loader, the fourth on port 3's (beside its weight
    # halves and residual boxes); the first is the input loader's box, the third port 2's half
    reads = ports.loader_reads(8, 4, residual=True)
    assert reads == (INPUT_READS - RESIDUAL_READS | {"weight_quarter1"},
                     WEIGHT_READS | {"input_quarter1"}, INPUT_HALF_READS | WEIGHT_QUARTER_READS,
                     WEIGHT_HALF_READS | RESIDUAL_READS | {"input_quarter3"})
    assert ports.loader_reads(2, 4)[1:] == (WEIGHT_READS | {"input_quarter1"},
                                            INPUT_HALF_READS, WEIGHT_HALF_READS
                                            | {"input_quarter3"})
    assert all(r in LOADER_READS for b in (1, 2, 8) for g in (2, 4) for res in (False, True)
               for r in ports.loader_reads(b, g, residual=res) if r)
    assert input_quarters(8) == (range(0, 2), range(2, 4), range(4, 6), range(6, 8))
    # the first two quarters are the lower half, the last two the upper
    lower, upper = input_halves(8)
    assert (input_quarters(8)[0].start, input_quarters(8)[2].start) == (lower.start, upper.start)
    for bad in (0, 2, 6, True, 4.0):
        with pytest.raises(ValueError, match="multiple of four slot groups"):
            input_quarters(bad)
