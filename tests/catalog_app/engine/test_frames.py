"""Frames cached for one piece of work are released at its end (`frames.cache_scope`)."""

import pytest

from catalog_app.engine.frames import cache_scope, cached


def test_a_scope_releases_the_frames_cached_inside_it_and_only_those(spark):
    outside = spark.range(10).cache()
    with cache_scope():
        first = cached(spark.range(5))
        with cache_scope():
            inner = cached(spark.range(3))
            assert inner.count() == 3 and inner.is_cached
        assert not inner.is_cached  # the inner scope released its own frame
        assert first.is_cached and first.count() == 5
    assert not first.is_cached
    assert outside.is_cached  # a frame cached outside every scope is left alone
    outside.unpersist()


def test_a_scope_releases_its_frames_when_the_work_fails(spark):
    @cache_scope()
    def failing():
        failing.frame = cached(spark.range(4))
        raise ValueError("the work failed")

    with pytest.raises(ValueError, match="the work failed"):
        failing()
    assert not failing.frame.is_cached
