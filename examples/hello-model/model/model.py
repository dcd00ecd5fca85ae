class Model:
    """Echoes the prompt back: enough to prove the deploy path end to end."""

    def __init__(self, **kwargs):
        self._ready = False

    def load(self):
        self._ready = True

    def predict(self, model_input):
        prompt = model_input.get("prompt", "")
        return {"completion": f"You asked: {prompt}"}
