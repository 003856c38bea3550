"""Grounded explanation parts (all ours): the technique named by retrieval over the training techniques (with an
explicit ``unknown``), the evidence taken from the event head's scores, and the events that define a recording's
technique (to check that an explanation cites them).

Retrieval: a window's vector is the mean of its real frame vectors ``f_t`` (the detection head's input); each
training technique's prototype is the mean of its malicious training windows' unit vectors, normalised; a window is
named after the prototype of highest cosine similarity when that similarity is at least ``tau``, else ``unknown``.
``tau`` is chosen by leave-one-recording-out on the training windows: each training recording is named against the
prototypes of the *other* recordings, its target being its technique when another recording shares it and
``unknown`` otherwise, and ``tau`` maximises the mean of the two accuracies (seen and unseen).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

UNKNOWN = "unknown"

# The event that carries each recording's technique (ours, read off the OTRF descriptions and the events): a regex on
# the lower-cased command line, registry key or file name. Recordings whose technique is spread over many similar
# events (LSASS reads, remote-service activity) have none.
DEFINING_EVENTS: dict[str, str] = {
    "empire_launcher_sct_regsvr32": r"regsvr32.*scrobj\.dll",
    "empire_launcher_vbs": r"wscript.*launcher\.vbs",
    "empire_msbuild_dcerpc_wmi_smb": r"msbuild\.exe.*pshell\.xml",
    "empire_ninjacopy_dumping_ntds_dit_file": r"ntds-copy\.dit",
    "empire_persistence_registry_modification_run_keys_elevated_user": r"\\currentversion\\run\\",
    "empire_persistence_registry_modification_run_keys_standard_user": r"\\currentversion\\run\\",
    "empire_shell_dcerpc_smb_service_dll_hijack": r"sc\.exe.*ikeext",
    "empire_shell_net_localgroup_administrators": r"\bnet1?(\.exe)?\"?\s+localgroup administrators",
    "empire_shell_reg_dump_sam": r"reg\.exe\"?\s+save hklm\\sam",
    "empire_shell_rpc_samr_smb_group_domain_admins_standard_user": r"group \"domain admins\" /domain",
    "empire_shell_rubeus_asktgt_ptt": r"rubeus\.exe.*asktgt",
    "empire_shell_samr_EnumDomainUsers": r"\bnet1?(\.exe)?\"?\s+user /domain",
    "empire_uac_shellapi_fodhelper": r"fodhelper\.exe|ms-settings\\shell\\open\\command",
    "empire_wmic_add_user_backdoor": r"net user /add",
}
_FIELDS = ("command_line", "target_object", "target_filename")


def is_defining_event(event: dict[str, Any], recording: str) -> bool:
    """Whether ``event`` is the defining event of ``recording``'s technique (:data:`DEFINING_EVENTS`)."""
    pat = DEFINING_EVENTS.get(recording)
    if pat is None:
        return False
    text = " ".join(str(event.get(k) or "") for k in _FIELDS).lower()
    return re.search(pat, text) is not None


def head_evidence(event_prob: Sequence[float], n_real: int, k: int = 4, threshold: float = 0.5) -> list[int]:
    """Frames to cite, from the event head: the real frames whose event probability is at least ``threshold``, highest
    first, at most ``k``; when none reaches it, the single highest-scoring frame.

    Args:
        event_prob: per-frame attack probabilities ``(T,)``; n_real: frames that hold an event (the first ``n_real``).
    Returns:
        Frame indices (0-based), possibly empty when ``n_real == 0``.
    """
    order = sorted(range(min(n_real, len(event_prob))), key=lambda t: -event_prob[t])
    above = [t for t in order if event_prob[t] >= threshold][:k]
    return above or order[:1]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def prototypes(vectors: np.ndarray, techniques: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Sorted technique names and their unit-norm prototypes ``(K, D)`` (mean of the windows' unit vectors).

    Args:
        vectors: ``(N, D)`` window vectors; techniques: ``N`` technique ids.
    """
    names = sorted(set(techniques))
    u = _unit(np.asarray(vectors, dtype=np.float64))
    tech = np.asarray(techniques)
    protos = np.stack([u[tech == n].mean(0) for n in names]) if names else np.zeros((0, u.shape[1]))
    return names, _unit(protos)


def nearest(vectors: np.ndarray, names: Sequence[str], protos: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Name of the most similar prototype and its cosine similarity per window (``("unknown", -1)`` when K = 0)."""
    if not len(names):
        return [UNKNOWN] * len(vectors), -np.ones(len(vectors))
    sim = _unit(np.asarray(vectors, dtype=np.float64)) @ protos.T
    best = sim.argmax(1)
    return [names[i] for i in best], sim[np.arange(len(sim)), best]


def name_techniques(vectors: np.ndarray, names: Sequence[str], protos: np.ndarray, tau: float) -> list[str]:
    """Retrieved technique per window, ``unknown`` when the best similarity is below ``tau``."""
    got, sim = nearest(vectors, names, protos)
    return [g if s >= tau else UNKNOWN for g, s in zip(got, sim)]


def calibrate_tau(vectors: np.ndarray, techniques: Sequence[str], recordings: Sequence[str]) -> float:
    """``tau`` by leave-one-recording-out on training windows (module docstring): maximises the mean of the accuracy
    on windows whose technique another recording shares and the ``unknown`` rate on the others.

    Returns:
        The chosen similarity threshold (``inf`` = always ``unknown`` when no recording's technique recurs).
    """
    tech, recs = np.asarray(techniques), np.asarray(recordings)
    guess, sims, seen, target = [], [], [], []
    for r in sorted(set(recordings)):
        held, rest = recs == r, recs != r
        names, protos = prototypes(vectors[rest], tech[rest])
        g, s = nearest(vectors[held], names, protos)
        guess += g
        sims += list(s)
        seen += [t in set(names) for t in tech[held]]
        target += list(tech[held])
    guess, sims, seen, target = np.asarray(guess), np.asarray(sims), np.asarray(seen), np.asarray(target)
    if not seen.any():
        return float("inf")
    best, best_tau = -1.0, float("inf")
    for tau in sorted(set(sims.tolist())) + [float("inf")]:
        named = sims >= tau
        acc_seen = float(((guess == target) & named)[seen].mean())
        acc_unseen = float((~named)[~seen].mean()) if (~seen).any() else 1.0
        if (acc_seen + acc_unseen) / 2 > best:
            best, best_tau = (acc_seen + acc_unseen) / 2, tau
    return best_tau
