(define (problem tyreworld-p05)
  (:domain tyreworld)
  (:objects
    boot - container
    hub1 - hub
    nut1 - nut
    flat1 spare1 - wheel
  )
  (:init
    (in wrench boot)
    (in jack boot)
    (in pump boot)
    (unlocked boot)
    (closed boot)
    (intact spare1)
    (in spare1 boot)
    (not-inflated spare1)
    (on flat1 hub1)
    (on-ground hub1)
    (tight nut1 hub1)
    (fastened hub1)
  )
  (:goal (and
    (on spare1 hub1)
  )))
