"""distributed.py without a process group: what one process agrees with itself, and how a lost rank is quoted."""

from selfplay.distributed import DistInfo, agree, first_words


def test_alone_agree_passes_its_own_answers_through_with_the_checkpoint_step():
    assert agree(True, False, DistInfo(), "cpu", 0.5, 40) == (True, False, 0.5, 40)
    assert agree(False, True, DistInfo(), "cpu")[3] is None


def test_a_collective_error_is_quoted_by_its_first_sentence_without_gloos_source_location():
    gloo = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:61586: "
            "Connection reset by peer. This is typically caused by a peer process exiting early.\nmore")
    assert first_words(gloo) == "Read error [127.0.0.1]:61586: Connection reset by peer"
    long = "word " * 60
    assert first_words(long, 40) == "word word word word word word word word ..."
