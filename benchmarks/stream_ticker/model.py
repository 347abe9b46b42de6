"""stream_ticker: RESPONSES token responses at known times, then a flags-only final response."""

import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})

        def value(key, default):
            return float(params.get(key, {}).get("string_value", default))

        self.responses = int(value("RESPONSES", 8))
        self.first_s = value("FIRST_DELAY_MS", 20) / 1000.0
        self.gap_s = value("GAP_MS", 5) / 1000.0
        self.tail_s = value("TAIL_MS", 2) / 1000.0
        self.threads = []

    def _serve(self, request, arrived):
        sender = request.get_response_sender()
        for i in range(self.responses):
            due = arrived + self.first_s + i * self.gap_s
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if request.is_cancelled():
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            token = np.array([f"tok{i} ".encode()], dtype=np.object_)
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TOKEN", token)]))
        time.sleep(self.tail_s)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def execute(self, requests):
        arrived = time.monotonic()
        self.threads = [t for t in self.threads if t.is_alive()]
        for request in requests:
            thread = threading.Thread(target=self._serve, args=(request, arrived), daemon=True)
            thread.start()
            self.threads.append(thread)
        return None

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=5)
