"""The worker's Celery app, configured from the environment (PKB_BROKER_URL)."""

from __future__ import annotations

from celery import Celery

from .config import WorkerConfig


def make_app(config: WorkerConfig | None = None) -> Celery:
    config = config or WorkerConfig()
    celery = Celery("pkb_worker", broker=config.broker_url)
    options: dict[str, object] = {
        # A job outlives its worker: redeliver it if the worker dies mid-run.
        "visibility_timeout": config.visibility_timeout_s or 2 * config.task_time_limit,
    }
    if config.broker_url.startswith("filesystem://"):
        options = {"data_folder_in": f"{config.broker_dir}/queue",
                   "data_folder_out": f"{config.broker_dir}/queue",
                   "processed_folder": f"{config.broker_dir}/processed",
                   "control_folder": f"{config.broker_dir}/control",
                   "store_processed": False}
    celery.conf.update(
        task_serializer="json", accept_content=["json"], result_backend=None,
        task_ignore_result=True, broker_transport_options=options,
        task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
        worker_concurrency=1, task_time_limit=config.task_time_limit,
        broker_connection_retry_on_startup=True, worker_hijack_root_logger=False,
        task_default_queue="pkb.hw.local-cpu",
    )
    celery.conf.imports = ["worker.tasks"]
    return celery


app = make_app()
