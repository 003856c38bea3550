"""Text prompts per dataset (ours).

``waterbirds-cifar``: our text tower, trained on ~3,200 captions, knows only their words, so the paper's LLM-written
bird attribute pairs are replaced by (a) class prompts across ``y`` as accept pairs (vehicle class k vs animal class
k) and (b) the same class prompt in front of the temple vs in front of flowers as reject pairs.
``waterbirds`` (real data, OpenCLIP ViT-B-16): landbird / waterbird prompts, "on land" / "on water" places, and
attribute pairs in the spirit of the authors' (webbed feet vs talons, ...; ours, not their exact list).

The zero-shot classifier of class ``y`` is the normalised mean of its normalised class-prompt embeddings.
"""

from __future__ import annotations

from dataclasses import dataclass

from zoo.methods.ltc.waterbirds_cifar import ANIMALS, PLACE_WORDS, TEMPLATES, VEHICLES


@dataclass(frozen=True)
class PromptSet:
    """Prompts of one dataset: ``names[y]`` (class words), ``place_phrases`` (place 0, place 1), ``template``,
    ``accept`` (positive, negative) attribute prompts for ``y = 1`` vs ``y = 0``."""

    names: tuple[tuple[str, ...], tuple[str, ...]]
    place_phrases: tuple[str, str]
    template: str
    accept: tuple[tuple[str, ...], tuple[str, ...]] | None = None

    def class_prompts(self, y: int) -> list[str]:
        """Prompts averaged into class ``y``'s zero-shot embedding."""
        return [self.template.format(c) for c in self.names[y]]

    def accept_pairs(self) -> tuple[list[str], list[str]]:
        """``(a_k, b_k)`` with ``a_k`` describing ``y = 1`` and ``b_k`` ``y = 0``."""
        if self.accept is not None:
            return list(self.accept[0]), list(self.accept[1])
        return self.class_prompts(1), self.class_prompts(0)

    def reject_pairs(self) -> tuple[list[str], list[str]]:
        """Each class prompt at place 1 vs at place 0 (differ only in the spurious attribute)."""
        p = self.class_prompts(0) + self.class_prompts(1)
        return [f"{q} {self.place_phrases[1]}" for q in p], [f"{q} {self.place_phrases[0]}" for q in p]

    def textspan_pool(self) -> tuple[list[str], list[bool]]:
        """TextSpan's text pool and which entries are about the place."""
        cls = self.class_prompts(0) + self.class_prompts(1)
        return cls + list(self.place_phrases), [False] * len(cls) + [True, True]

    def all_prompts(self) -> list[str]:
        a, b = self.accept_pairs()
        r1, r2 = self.reject_pairs()
        return a + b + r1 + r2 + self.textspan_pool()[0]


PROMPT_SETS = {
    "waterbirds-cifar": PromptSet((ANIMALS, VEHICLES), (PLACE_WORDS[0], PLACE_WORDS[1]), "a photo of a {}"),
    "waterbirds": PromptSet(
        (("landbird",), ("waterbird",)),
        ("on land", "on water"),
        "a photo of a {}",
        accept=(
            ("a bird with webbed feet", "a bird with a long neck for diving", "a seabird with a hooked bill"),
            (
                "a bird with talons on its feet",
                "a bird with a short neck for perching",
                "a songbird with a small conical bill",
            ),
        ),
    ),
}


def caption_texts() -> list[str]:
    """Every caption ``build_data`` can write and every ``waterbirds-cifar`` prompt (the caption vocabulary)."""
    names = VEHICLES + ANIMALS
    caps = [
        t.format(c) + end for t in TEMPLATES for c in names for end in ("", " " + PLACE_WORDS[0], " " + PLACE_WORDS[1])
    ]
    return caps + PROMPT_SETS["waterbirds-cifar"].all_prompts()
