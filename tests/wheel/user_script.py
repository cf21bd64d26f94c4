"""A user's own script against the installed wheel (no checkout on sys.path):
estimate and plan a torchvision and a transformers model, apply the plan,
and print what tests/wheel/wheel_test.py compares with measured steps."""
import json, sys, torch, torch.nn.functional as F, torchvision, transformers  # noqa: E401
import memplan.torch as mt

cnn, x = torchvision.models.resnet18(num_classes=10), torch.randn(4, 3, 128, 128)
cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=512, n_positions=64)
lm, ids = transformers.GPT2LMHeadModel(cfg), torch.randint(0, 512, (2, 32))
lm_loss = lambda out, y: F.cross_entropy(out.logits.flatten(0, 1), y.flatten())  # noqa: E731
est_cnn, est_lm = mt.estimate(cnn, (x,)), mt.estimate(lm, (ids,), loss_fn=lm_loss, target=ids)
plan = mt.plan(cnn, (x,), budget=int(0.96 * est_cnn.peak_bytes))
wrapped = plan.apply(cnn)
# The ten lines above are the user's; below, what the test compares.
out = {"memplan_file": mt.__file__, "torch": torch.__version__,
       "transformers": transformers.__version__,
       "resnet18": {"predicted": est_cnn.peak_bytes, "measured": mt.measure(
           torchvision.models.resnet18(num_classes=10), (x,))["peak_bytes"]},
       "gpt2": {"predicted": est_lm.peak_bytes,
                "measured": mt.measure(lm, (ids,), target=ids, loss_fn=lm_loss)["peak_bytes"]},
       "plan": {"fits": plan.fits, "peak": plan.peak_bytes, "budget": plan.budget_bytes,
                "modules": plan.modules, "wrapped": wrapped,
                "measured": mt.measure(cnn, (x,))["peak_bytes"]},
       "fits": [est_cnn.fits(est_cnn.peak_bytes), est_cnn.fits(est_cnn.peak_bytes - 1)]}
json.dump(out, sys.stdout)
