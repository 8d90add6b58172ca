"""The Spark settings each worker process starts its application with: on a cluster, only its share."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from catalog_app.engine.session import SparkConfig
from lakeui.jobs import tasks
from lakeui.settings.env import spark_conf


def test_a_local_master_asks_no_cluster_share():
    options = SparkConfig(master="local[*]").options()
    assert not any(key.startswith(("spark.dynamicAllocation", "spark.cores", "spark.executor")) for key in options)


def test_on_a_cluster_idle_executors_go_back_and_cores_are_capped():
    options = SparkConfig(master="spark://h:7077", max_cores=3, executor_cores=2, executor_idle_timeout="5s").options()
    assert options["spark.dynamicAllocation.enabled"] == "true"
    assert options["spark.dynamicAllocation.shuffleTracking.enabled"] == "true"
    assert options["spark.dynamicAllocation.executorIdleTimeout"] == "5s"
    assert options["spark.dynamicAllocation.minExecutors"] == "0"
    # 3 cores of 2-core executors: one executor; spark.cores.max a multiple of the executor's cores
    assert (options["spark.dynamicAllocation.maxExecutors"], options["spark.cores.max"]) == ("1", "2")
    assert "spark.driver.host" not in options  # the executors must reach the driver


def test_without_dynamic_allocation_the_cap_is_a_fixed_number_of_executors():
    options = SparkConfig(master="yarn", dynamic_allocation=False, max_cores=4).options()
    assert "spark.dynamicAllocation.enabled" not in options
    assert (options["spark.executor.instances"], options["spark.cores.max"]) == ("4", "4")


def test_extra_settings_win():
    options = SparkConfig(master="yarn", extra={"spark.yarn.queue": "etl", "spark.cores.max": "8"}).options()
    assert (options["spark.yarn.queue"], options["spark.cores.max"]) == ("etl", "8")


def test_extra_settings_from_the_environment():
    env = {"LAKEUI_SPARK_CONF": "spark.yarn.queue=etl, spark.kubernetes.namespace=lake"}
    assert spark_conf(env, "LAKEUI_SPARK_CONF") == {"spark.yarn.queue": "etl", "spark.kubernetes.namespace": "lake"}
    with pytest.raises(ImproperlyConfigured):
        spark_conf({"LAKEUI_SPARK_CONF": "yarn.queue"}, "LAKEUI_SPARK_CONF")


@pytest.mark.parametrize(
    ("queues", "kind"),
    [(["lakeui-x-interactive"], "interactive"), ("lakeui-x-interactive", "interactive"), (["lakeui-x"], "jobs"),
     (["lakeui-x", "lakeui-x-interactive"], "jobs"), (None, "jobs")],
)  # fmt: skip
def test_the_worker_kind_follows_the_queue_it_serves(settings, queues, kind):
    settings.LAKEUI_INTERACTIVE_QUEUE, settings.LAKEUI_WORKER_KIND = "lakeui-x-interactive", ""
    try:
        tasks.note_worker_kind(options={"queues": queues})
        assert tasks.worker_kind() == kind
        settings.LAKEUI_WORKER_KIND = "interactive"  # the environment says
        tasks.note_worker_kind(options={"queues": ["lakeui-x"]})
        assert tasks.worker_kind() == "interactive"
    finally:
        tasks._kind.clear()


def test_a_long_lived_driver_keeps_only_the_newest_query_executions(spark):
    # A worker's driver runs thousands of queries; each one kept in Spark's status store holds its plan's metrics.
    for n in range(70):
        spark.range(n + 1).selectExpr("sum(id)").collect()
    store = spark._jsparkSession.sharedState().statusStore()
    assert store.executionsCount() <= 50
